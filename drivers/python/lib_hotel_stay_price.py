def stay_price(check_in: int, check_out: int, nightly: int, weekend_extra: int) -> int:
    if check_out <= check_in:
        return -1
    total = 0
    for i, day in enumerate(range(check_in, check_out)):
        if (i + 1) % 7 == 0:  # every 7th night is free
            continue
        total += nightly + (weekend_extra if day % 7 in (5, 6) else 0)
    return total + 15


if __name__ == "__main__":
    cases = [(0, 1, 100, 30), (4, 7, 100, 30), (0, 7, 100, 30), (3, 17, 90, 0), (10, 10, 100, 30),
             (12, 9, 100, 30), (5, 6, 120, 50), (0, 15, 80, 20)]
    for a, b, n, w in cases:
        print(f"days {a}-{b} @{n}+{w}: {stay_price(a, b, n, w)}")
