def edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
        prev = cur
    return prev[-1]


if __name__ == "__main__":
    def suggest(typed: str, commands: list[str]) -> str:
        best, best_d = "", 3
        for c in sorted(commands):
            d = edit_distance(typed, c)
            if d < best_d:
                best, best_d = c, d
        return best or "(none)"

    for a, b in [("", ""), ("abc", ""), ("", "xy"), ("kitten", "sitting"), ("mute", "mute"),
                 ("flaw", "lawn"), ("invite", "inivte")]:
        print(f"{a}|{b} -> {edit_distance(a, b)}")
    cmds = ["mute", "kick", "invite", "topic", "leave"]
    for t in ["mtue", "kik", "tpoic", "xyzzy", "leav"]:
        print(f"/{t} -> {suggest(t, cmds)}")
