def parse_order(line: str) -> list[tuple[str, int]]:
    counts = {}
    for item in line.split(","):
        words = item.split()
        if not words:
            continue
        n = 1
        last = words[-1]
        if len(words) > 1 and last[0] in "xX" and last[1:].isdigit():
            n = int(last[1:])
            words = words[:-1]
        if n == 0:
            continue
        name = " ".join(words).lower()
        counts[name] = counts.get(name, 0) + n
    return sorted(counts.items())


if __name__ == "__main__":
    print(parse_order("Tomato x3, Basil x10, tomato X2"))
    print(parse_order("  Sweet   Pea , , marigold x0, Kale"))
    print(parse_order(""))
    print(parse_order("Chili xx2, Bean x12, bean"))
