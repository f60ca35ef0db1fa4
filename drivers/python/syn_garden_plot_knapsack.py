def best_yield(space: list[int], value: list[int], capacity: int) -> int:
    dp = [0] * (capacity + 1)
    for need, worth in zip(space, value):
        for c in range(capacity, need - 1, -1):
            dp[c] = max(dp[c], dp[c - need] + worth)
    return dp[capacity]


if __name__ == "__main__":
    space = [3, 4, 2, 5, 1]
    value = [40, 50, 15, 60, 10]
    for cap in [0, 1, 3, 6, 7, 10, 15]:
        print(f"cap {cap}: {best_yield(space, value, cap)}")
    print(f"none: {best_yield([], [], 5)}")
    print(f"too big: {best_yield([9], [100], 8)}")
