def best_spot(n: int, taken: list[int]) -> int:
    occupied = sorted({t for t in taken if 0 <= t < n})
    if n < 1 or len(occupied) == n:
        return -1
    if not occupied:
        return 0
    best, dist = 0, occupied[0]  # the left end
    for left, right in zip(occupied, occupied[1:]):
        gap = (right - left) // 2
        if gap > dist:
            best, dist = left + gap, gap
    if n - 1 - occupied[-1] > dist:  # the right end
        best = n - 1
    return best


if __name__ == "__main__":
    cases = [(10, []), (10, [0]), (10, [9]), (10, [0, 9]), (10, [4]), (8, [0, 1, 7]),
             (5, [0, 1, 2, 3, 4]), (0, []), (7, [3, 3, 0])]
    for n, t in cases:
        print(f"n={n} taken={t}: {best_spot(n, t)}")
