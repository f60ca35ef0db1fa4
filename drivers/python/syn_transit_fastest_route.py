import heapq


def fastest(links: list[tuple[str, str, int]], src: str, dst: str) -> int:
    adj = {}
    for a, b, minutes in links:
        adj.setdefault(a, []).append((minutes, b))
        adj.setdefault(b, []).append((minutes, a))
    best = {src: 0}
    heap = [(0, src)]
    while heap:
        d, u = heapq.heappop(heap)
        if u == dst:
            return d
        if d > best.get(u, d):
            continue  # a stale entry
        for minutes, v in adj.get(u, []):
            nd = d + minutes
            if v not in best or nd < best[v]:
                best[v] = nd
                heapq.heappush(heap, (nd, v))
    return -1


if __name__ == "__main__":
    net = [("A", "B", 5), ("B", "C", 4), ("A", "C", 12), ("C", "D", 3), ("B", "D", 10),
           ("E", "F", 1)]
    for s, d in [("A", "D"), ("A", "C"), ("D", "A"), ("A", "A"), ("A", "F"), ("Z", "A"),
                 ("E", "F")]:
        print(f"{s}->{d}: {fastest(net, s, d)}")
