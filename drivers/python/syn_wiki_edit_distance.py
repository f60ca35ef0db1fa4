def edit_distance(a: str, b: str) -> int:
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            substitute = prev[j - 1] + (0 if a[i - 1] == b[j - 1] else 1)
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, substitute)
        prev = cur
    return prev[len(b)]


if __name__ == "__main__":
    def suggest(query: str, titles: list[str]) -> str:
        best = sorted(titles, key=lambda t: (edit_distance(query, t), t))
        return best[0] if best else ""

    for x, y in [("", ""), ("", "abc"), ("kitten", "sitting"), ("Home", "home"), ("flaw", "lawn"),
                 ("wiki", "wiki"), ("install", "uninstall")]:
        print(f"{x!r} {y!r} -> {edit_distance(x, y)}")
    print(suggest("Instal", ["Install", "Uninstall", "Intro"]))
