def best_window(vals: list[int], k: int) -> list[int]:
    if k <= 0 or k > len(vals):
        return [-1, -1]
    current = best = sum(vals[:k])
    start = 0
    for i in range(k, len(vals)):
        current += vals[i] - vals[i - k]
        if current > best:
            best, start = current, i - k + 1
    return [best, start]


if __name__ == "__main__":
    week = [30, 0, 45, 60, 0, 90, 20]
    for k in [1, 2, 3, 7, 8, 0]:
        print(f"k={k}: {best_window(week, k)}")
    print(f"ties: {best_window([5, 5, 5, 5], 2)}")
    print(f"negatives: {best_window([-3, -1, -2], 1)}")
