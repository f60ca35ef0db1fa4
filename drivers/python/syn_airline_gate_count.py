import heapq


def min_gates(stays: list[tuple[int, int]], turnaround: int) -> int:
    busy = []  # min-heap of the times gates become free
    gates = 0
    for arrive, depart in sorted(s for s in stays if s[1] >= s[0]):
        while busy and busy[0] <= arrive:
            heapq.heappop(busy)
        heapq.heappush(busy, depart + turnaround)
        gates = max(gates, len(busy))
    return gates


if __name__ == "__main__":
    day = [(600, 660), (610, 700), (650, 720), (700, 760), (715, 800), (790, 850)]
    for t in [0, 10, 30, 60]:
        print(f"turnaround {t}: {min_gates(day, t)}")
    print(min_gates([], 15), min_gates([(100, 50)], 0), min_gates([(0, 10), (10, 20), (20, 30)], 0),
          min_gates([(5, 5), (5, 5)], 0))
