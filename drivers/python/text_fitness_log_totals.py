def activity_totals(log: str) -> list[str]:
    totals = {}
    counts = {}
    for line in log.split("\n"):
        parts = line.split()
        if len(parts) != 3 or not parts[2].lower().endswith("km"):
            continue
        try:
            distance = float(parts[2][:-2])
        except ValueError:
            continue
        activity = parts[1].lower()
        totals[activity] = totals.get(activity, 0.0) + distance
        counts[activity] = counts.get(activity, 0) + 1
    order = sorted(totals, key=lambda a: (-totals[a], a))
    return [f"{a}: {counts[a]}x {totals[a]:.1f} km" for a in order]


if __name__ == "__main__":
    log = ("2024-03-01 run 5.2km\n2024-03-02 Bike 20KM\n2024-03-02 run 3.8km\nbroken line\n"
           "2024-03-03 swim 1.5km\n2024-03-04 row 9.0km\n2024-03-05 run abckm\n"
           "2024-03-06 swim 7.5km\n"
           "2024-03-07 yoga 60min\n")
    for line in activity_totals(log):
        print(line)
    print(activity_totals(""))
