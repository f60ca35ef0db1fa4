def edit_distance(a: str, b: str) -> int:
    # one row of the Levenshtein table at a time
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
        prev = cur
    return prev[len(b)]


if __name__ == "__main__":
    def likely_dupes(names: list[str], limit: int) -> list[str]:
        out = []
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                if edit_distance(names[i].lower(), names[j].lower()) <= limit:
                    out.append(f"{names[i]}~{names[j]}")
        return out

    print(edit_distance("kitten", "sitting"))
    print(edit_distance("", "abc"))
    print(edit_distance("flaw", "lawn"))
    print(edit_distance("same", "same"))
    print(edit_distance("Ann", "ann"))
    print(likely_dupes(["Jon Smith", "John Smith", "Jane Smyth", "jon smith", "Bob"], 1))
