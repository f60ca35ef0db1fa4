MOD = 1_000_000_007


def count_routes(grid: list[str]) -> int:
    if not grid or not grid[0]:
        return 0
    rows, cols = len(grid), len(grid[0])
    ways = [[0] * cols for _ in range(rows)]
    for r in range(rows):
        for c in range(cols):
            if grid[r][c] == "#":
                continue
            if r == 0 and c == 0:
                ways[r][c] = 1
            else:
                up = ways[r - 1][c] if r > 0 else 0
                left = ways[r][c - 1] if c > 0 else 0
                ways[r][c] = (up + left) % MOD
    return ways[-1][-1]


if __name__ == "__main__":
    grids = [["...", "...", "..."], ["...", ".#.", "..."], ["#..", "...", "..."], ["..", ".#"],
             ["."],
             [], [".#..", "....", "..#.", "...."], ["." * 40 for _ in range(40)]]
    for g in grids:
        print(f"{len(g)}x{len(g[0]) if g else 0}: {count_routes(g)}")
