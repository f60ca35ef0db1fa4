def trip_fare(zones: int, age: int, peak: bool) -> int:
    if zones < 1 or age < 6:
        return 0
    fare = 250 + 120 * (zones - 1)
    if age < 18 or age >= 65:
        fare //= 2
    if peak:
        fare += 40
    return fare


if __name__ == "__main__":
    def cents(c: int) -> str:
        return f"${c // 100}.{c % 100:02d}"

    cases = [(1, 30, False), (3, 30, True), (2, 12, False), (2, 70, True), (0, 40, True),
             (4, 5, True), (1, 17, True), (5, 65, False)]
    for z, a, p in cases:
        print(f"zones={z} age={a} peak={p}: {cents(trip_fare(z, a, p))}")
