def group_plates(reads: list[str]) -> dict[str, list[str]]:
    groups = {}
    for read in reads:
        plate = read.upper().replace(" ", "").replace("-", "").replace(".", "")
        plate = plate[:2] + plate[2:].replace("O", "0")  # a camera's O after the region is a zero
        if not 5 <= len(plate) <= 8 or not plate[:2].isalpha():
            continue
        if not any(c.isdigit() for c in plate):
            continue
        region = groups.setdefault(plate[:2], [])
        if plate not in region:
            region.append(plate)
    return {region: sorted(plates) for region, plates in groups.items()}


if __name__ == "__main__":
    reads = ["ab-123", "AB 1O3", "ab.123", "xy-9988-q", "12-ABC", "cd-efgh", "cd 7", "Cd-77o",
             "OX-0001",
             "ox 0o01", "zzzzzzz9"]
    res = group_plates(reads)
    for k in sorted(res):
        print(f"{k}: {', '.join(res[k])}")
    print(len(group_plates([])), len(res))
