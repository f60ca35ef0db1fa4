def min_largest_batch(sizes: list[int], k: int) -> int:
    if not sizes:
        return 0
    k = max(k, 1)
    lo, hi = max(sizes), sum(sizes)  # binary search on the cap
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(sizes, k, mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


if __name__ == "__main__":
    def fits(sizes: list[int], k: int, cap: int) -> bool:
        batches, current = 1, 0
        for s in sizes:
            if current + s > cap:
                batches += 1
                current = 0
            current += s
        return batches <= k

    cases = [([], 3), ([5], 1), ([7, 2, 5, 10, 8], 2), ([1, 2, 3, 4, 5], 2), ([1, 2, 3, 4, 5], 5),
             ([1, 2, 3, 4, 5], 9), ([10, 10, 10], 0), ([3, 1, 4, 1, 5, 9, 2, 6], 3)]
    for s, k in cases:
        print(f"{s} k={k} -> {min_largest_batch(s, k)}")
