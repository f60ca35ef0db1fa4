def headways(line: str) -> list[int]:
    minutes = set()
    for part in line.split(","):
        part = part.strip()
        if part:
            h, m = part.split(":")
            minutes.add(int(h) * 60 + int(m))
    times = sorted(minutes)
    return [b - a for a, b in zip(times, times[1:])]


if __name__ == "__main__":
    samples = ["08:00, 08:15,08:30 , 09:05", "23:50,00:10", " 07:45 ", "",
               "12:00,12:00,12:20,,11:55",
               "06:05,06:07,06:59"]
    for s in samples:
        gaps = headways(s)
        avg = (sum(gaps) // len(gaps)) if gaps else 0
        print(f"'{s}' -> {gaps} avg={avg}")
