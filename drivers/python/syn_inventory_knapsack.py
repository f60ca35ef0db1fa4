def best_load(weights: list[int], values: list[int], cap: int) -> int:
    if cap < 0:
        return 0
    dp = [0] * (cap + 1)
    for w, v in zip(weights, values):
        for c in range(cap, w - 1, -1):
            dp[c] = max(dp[c], dp[c - w] + v)
    return dp[cap]


if __name__ == "__main__":
    print(best_load([1, 3, 4, 5], [1, 4, 5, 7], 7))
    print(best_load([10, 20, 30], [60, 100, 120], 50))
    print(best_load([5], [10], 4))
    print(best_load([], [], 10))
    print(best_load([2, 2, 2], [3, 3, 3], 0))
    print(best_load([2, 3, 4], [4, 5, 6], -1))
    print(best_load([1, 1, 1, 1], [2, 3, 4, 5], 3))
