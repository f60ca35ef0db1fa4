def best_rating(prices: list[int], ratings: list[int], budget: int) -> int:
    if budget < 0:
        return 0
    best = [0] * (budget + 1)  # best[c]: best rating spending at most c
    for price, rating in zip(prices, ratings):
        for cap in range(budget, price - 1, -1):
            best[cap] = max(best[cap], best[cap - price] + rating)
    return best[budget]


if __name__ == "__main__":
    prices = [12, 7, 11, 8, 9]
    ratings = [24, 13, 23, 15, 16]
    for b in [0, 6, 7, 15, 20, 26, 47, 100]:
        print(f"budget {b}: {best_rating(prices, ratings, b)}")
    print(f"none: {best_rating([], [], 10)}")
    print(f"negative: {best_rating([1], [5], -1)}")
