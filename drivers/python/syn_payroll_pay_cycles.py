def coincide_day(cycles: list[int], offsets: list[int]) -> int:
    day, step = 0, 1  # day satisfies every cycle so far; step is their lcm
    for cycle, offset in zip(cycles, offsets):
        want = offset % cycle
        lcm = step // gcd(step, cycle) * cycle
        while day % cycle != want:
            day += step
            if day >= lcm:
                return -1
        step = lcm
    return day


if __name__ == "__main__":
    def gcd(a: int, b: int) -> int:
        while b != 0:
            a, b = b, a % b
        return abs(a)

    print(coincide_day([7, 14], [0, 0]))
    print(coincide_day([3, 5, 7], [2, 3, 2]))
    print(coincide_day([4, 6], [1, 2]))
    print(coincide_day([4, 6], [2, 4]))
    print(coincide_day([], []))
    print(coincide_day([10], [23]))
    print(coincide_day([12, 18, 30], [5, 11, 5]))
