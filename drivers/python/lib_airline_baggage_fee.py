def baggage_fee(cabin: str, status: str, weights: list[int]) -> int:
    free = {"first": 3, "business": 2}.get(cabin, 0)
    if status == "gold":
        free += 1
    total = 0
    count = 0
    for w in weights:
        if w <= 0:
            continue
        count += 1
        if count > free:
            total += 35 if count == free + 1 else 50
        if w > 32:
            total += 150
        elif w > 23:
            total += 75
    return total


if __name__ == "__main__":
    cases = [("economy", "", [20]), ("economy", "", [20, 22, 18]), ("economy", "gold", [20, 25]),
             ("business", "", [30, 10, 33]), ("first", "gold", [23, 24, 40, 5, 5]),
             ("economy", "", []), ("economy", "", [0, -4, 12])]
    for c, s, ws in cases:
        print(f"{c}/{s or '-'} {ws}: ${baggage_fee(c, s, ws)}")
