def merge_periods(periods: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged = []
    for start, end in sorted(p for p in periods if p[1] >= p[0]):
        if merged and start <= merged[-1][1] + 1:  # overlapping or adjacent days
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


if __name__ == "__main__":
    print(merge_periods([(1, 5), (3, 9), (11, 12)]))
    print(merge_periods([(10, 20), (1, 3), (4, 6), (21, 21)]))
    print(merge_periods([]))
    print(merge_periods([(5, 2), (7, 8)]))
    print(merge_periods([(1, 100), (2, 3), (50, 60), (101, 101), (103, 110)]))
