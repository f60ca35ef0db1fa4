def parse_roster(lines: list[str]) -> dict[int, list[str]]:
    roster = {}
    for raw in lines:
        parts = [p.strip() for p in raw.split(";")]
        if len(parts) != 3 or not parts[0] or not parts[1].isdigit():
            continue
        roster.setdefault(int(parts[1]), []).append(parts[0].title())
    for names in roster.values():
        names.sort()
    return roster


if __name__ == "__main__":
    lines = ["ana smith; 7; 91", "ben;8;77", "", "  cal ; 7 ; 64 ", "dee;seven;80", ";8;50",
             "eve;8",
             "abe lin;7;88", "zed;10;99;extra"]
    result = parse_roster(lines)
    for g in sorted(result):
        print(f"grade {g}: {result[g]}")
    print(len(parse_roster([])))
