def best_streak(deltas: list[int]) -> tuple[int, int, int]:
    if not deltas:
        return (0, -1, -1)
    best, best_start, best_end = deltas[0], 0, 0
    run, start = 0, 0
    for i, x in enumerate(deltas):
        run += x
        if run > best:
            best, best_start, best_end = run, start, i
        if run < 0:
            run, start = 0, i + 1
    return (best, best_start, best_end)


if __name__ == "__main__":
    print(best_streak([-2, 1, -3, 4, -1, 2, 1, -5, 4]))
    print(best_streak([5, -10, 5]))
    print(best_streak([-3, -1, -2]))
    print(best_streak([]))
    print(best_streak([0, 0, 3, -3, 3]))
    print(best_streak([7]))
