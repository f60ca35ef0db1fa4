def group_sizes(n: int, pairs: list[tuple[int, int]]) -> list[int]:
    parent = list(range(n))
    for a, b in pairs:
        ra, rb = find_root(parent, a), find_root(parent, b)
        if ra != rb:
            parent[ra] = rb
    sizes = {}
    for i in range(n):
        root = find_root(parent, i)
        sizes[root] = sizes.get(root, 0) + 1
    return sorted(sizes.values(), reverse=True)


if __name__ == "__main__":
    def find_root(parent: list[int], x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    print(group_sizes(0, []))
    print(group_sizes(1, []))
    print(group_sizes(5, []))
    print(group_sizes(4, [(0, 1), (1, 2), (2, 3)]))
    print(group_sizes(7, [(0, 1), (2, 3), (3, 4), (4, 2), (5, 5)]))
    print(group_sizes(8, [(7, 0), (6, 1), (1, 0), (3, 4)]))
