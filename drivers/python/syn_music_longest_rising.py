def longest_rising(vals: list[int]) -> int:
    tails = []  # tails[k]: smallest tail of a rising run of length k + 1
    for v in vals:
        lo, hi = 0, len(tails)
        while lo < hi:
            mid = (lo + hi) // 2
            if tails[mid] < v:
                lo = mid + 1
            else:
                hi = mid
        if lo == len(tails):
            tails.append(v)
        else:
            tails[lo] = v
    return len(tails)


if __name__ == "__main__":
    cases = [[], [5], [3, 3, 3], [1, 2, 3, 4], [4, 3, 2, 1], [10, 9, 2, 5, 3, 7, 101, 18],
             [0, 8, 4, 12, 2, 10, 6, 14, 1, 9]]
    for c in cases:
        print(f"{c} -> {longest_rising(c)}")
