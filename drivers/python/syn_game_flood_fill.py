def islands(grid: list[str]) -> tuple[int, int]:
    seen = set()
    sizes = []
    for r, row in enumerate(grid):
        for c, cell in enumerate(row):
            if cell != "#" or (r, c) in seen:
                continue
            size = 0
            stack = [(r, c)]
            seen.add((r, c))
            while stack:
                y, x = stack.pop()
                size += 1
                for ny, nx in [(y + 1, x), (y - 1, x), (y, x + 1), (y, x - 1)]:
                    # rows may differ in length
                    if (0 <= ny < len(grid) and 0 <= nx < len(grid[ny]) and grid[ny][nx] == "#"
                            and (ny, nx) not in seen):
                        seen.add((ny, nx))
                        stack.append((ny, nx))
            sizes.append(size)
    return (len(sizes), max(sizes, default=0))


if __name__ == "__main__":
    maps = [[], ["...", "..."], ["##.", "#..", "..#"], ["#.#.#", ".#.#.", "#.#.#"],
            ["####", "#..#", "####"], ["##", "#", "###", "..#"]]
    for m in maps:
        print(islands(m))
