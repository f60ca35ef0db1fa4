def merge_slots(slots: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged = []
    for start, end in sorted(slots):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


if __name__ == "__main__":
    cases = [[], [(540, 570)], [(600, 630), (540, 570), (570, 600)],
             [(540, 600), (550, 560), (700, 720), (710, 730)], [(800, 810), (780, 790), (790, 795)]]
    for c in cases:
        print(merge_slots(c))
