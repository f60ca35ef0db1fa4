def parse_catalog(text: str) -> list["Entry"]:
    out = []
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split("|")]
        if len(parts) != 3 or not parts[2].isdigit():
            continue
        out.append(Entry(title=parts[0], author=parts[1], year=int(parts[2])))
    return sorted(out, key=lambda e: (e.year, e.title))


if __name__ == "__main__":
    from dataclasses import dataclass

    @dataclass
    class Entry:
        title: str
        author: str
        year: int

    text = ("# catalog v1\nDune | Herbert | 1965\n\n  Emma|Austen|1815  \nBroken line\n"
            "Neuromancer | Gibson | 1984\nBad | Year | 19x4\nAlpha | Anon | 1965\n"
            "Too|many|parts|here\n")
    entries = parse_catalog(text)
    print(len(entries))
    for e in entries:
        print(f"{e.year} {e.title} by {e.author}")
    print(len(parse_catalog("")))
