def summarize(lines: list[str]) -> list[str]:
    totals = {}  # code -> [trips, km, fuel]
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split("|")
        if len(fields) != 3:
            continue
        values = {}
        for pair in fields[2].split(";"):
            if "=" in pair:
                key, value = pair.split("=", 1)
                values[key.strip()] = int(value)
        row = totals.setdefault(fields[0].strip().upper(), [0, 0, 0])
        row[0] += 1
        row[1] += values.get("km", 0)
        row[2] += values.get("fuel", 0)
    return [f"{{{code}}}: trips={r[0]} km={r[1]} fuel={r[2]}" for code, r in sorted(totals.items())]


if __name__ == "__main__":
    log = ["t01|2024-05-01|km=120;fuel=30", "T02|2024-05-01|fuel=12;km=40;driver=7",
           "# header comment",
           "", "T01 |2024-05-02|km=80", "bad line without pipes", "T03|2024-05-02|note;km=5",
           "T02|2024-05-03|", "T04|x|y|z"]
    for row in summarize(log):
        print(row)
    print(summarize([]))
