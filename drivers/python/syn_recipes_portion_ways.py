def portion_ways(sizes: list[int], target: int) -> int:
    if target < 0:
        return 0
    ways = [1] + [0] * target
    for size in sizes:
        if size <= 0:
            continue
        for t in range(size, target + 1):
            ways[t] += ways[t - size]
    return ways[target]


if __name__ == "__main__":
    sizes = [50, 100, 250]
    for t in [0, 50, 100, 300, 500, 520, 1000]:
        print(f"{t}: {portion_ways(sizes, t)}")
    print(f"odd sizes: {portion_ways([3, 5, 0, -2], 11)}")
    print(f"negative: {portion_ways([1], -5)}")
