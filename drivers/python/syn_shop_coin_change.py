def min_coins(coins: list[int], amount: int) -> int:
    if amount < 0:
        return -1
    unreachable = amount + 1
    dp = [0] + [unreachable] * amount
    for a in range(1, amount + 1):
        for c in coins:
            if 0 < c <= a:
                dp[a] = min(dp[a], dp[a - c] + 1)
    return -1 if dp[amount] >= unreachable else dp[amount]


if __name__ == "__main__":
    print(min_coins([1, 5, 10, 25], 63))
    print(min_coins([2], 3))
    print(min_coins([1, 3, 4], 6))
    print(min_coins([5, 10], 0))
    print(min_coins([7, 0, -2], 14))
    print(min_coins([3, 7], -1))
    print(min_coins([186, 419, 83, 408], 6249))
