def summarize(csv_text: str) -> list[str]:
    groups = {}
    for line in csv_text.strip().split("\n")[1:]:  # skip the header
        parts = line.split(",")
        if len(parts) != 3:
            continue
        try:
            temp = float(parts[2].strip())
        except ValueError:
            continue
        groups.setdefault(parts[1].strip(), []).append(temp)
    out = []
    for city in sorted(groups):
        temps = groups[city]
        avg = sum(temps) / len(temps)
        out.append(f'{{"city": "{city}", "n": {len(temps)}, "min": {min(temps):.1f}, '
                   f'"max": {max(temps):.1f}, "avg": {avg:.1f}}}')
    return out


if __name__ == "__main__":
    data = ("date,city,temp\n2024-06-01,Oslo,14.5\n2024-06-01, Rome ,27\n2024-06-02,Oslo,16.25\n"
            "bad line\n"
            "2024-06-02,Rome,n/a\n2024-06-03,Rome,29.5\n2024-06-03,Cairo,35.0\n"
            "2024-06-04,Oslo,12,extra\n")
    for line in summarize(data):
        print(line)
    print(summarize("date,city,temp"))
