def peak_night(bookings: list[tuple[int, int, int]]) -> tuple[int, int]:
    events = {}
    for check_in, check_out, rooms in bookings:
        if check_out <= check_in or rooms <= 0:
            continue
        events[check_in] = events.get(check_in, 0) + rooms
        events[check_out] = events.get(check_out, 0) - rooms
    best = (-1, 0)
    occupied = 0
    for day in sorted(events):
        occupied += events[day]
        if occupied > best[1]:
            best = (day, occupied)
    return best


if __name__ == "__main__":
    tests = [[(1, 4, 2), (2, 5, 3), (4, 6, 1)], [(1, 3, 5), (3, 5, 5)], [],
             [(5, 5, 3), (7, 6, 1), (2, 3, 0)],
             [(10, 20, 1), (12, 13, 4), (12, 14, 2), (13, 15, 6)],
             [(0, 100, 1)]]
    for t in tests:
        print(f"{t} -> {peak_night(t)}")
