def parse_timesheet(text: str) -> dict[str, int]:
    days = {}
    for line in text.splitlines():
        tokens = line.split()
        if not tokens:
            continue
        day = tokens[0].capitalize()
        days.setdefault(day, 0)
        for span in tokens[1:]:
            if "-" not in span:
                continue
            a, b = span.split("-", 1)
            start, end = to_minutes(a), to_minutes(b)
            if end <= start:
                end += 24 * 60  # the shift runs past midnight
            days[day] += end - start
    return days


if __name__ == "__main__":
    def to_minutes(hhmm: str) -> int:
        parts = hhmm.split(":")
        return int(parts[0]) * 60 + int(parts[1])

    sheet = ("Mon 9:00-12:30 13:15-17:00\n\ntue 22:00-6:00\nWED\nthu 8:00-8:00 lunch 9:30-10:00\n"
             "mon 18:00-19:45")
    result = parse_timesheet(sheet)
    for d in sorted(result):
        print(f"{d}: {result[d] // 60}h{result[d] % 60:02d}")
