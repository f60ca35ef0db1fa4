def discounted_total(cents: int, member: bool, items: int) -> int:
    if cents < 0 or items < 1:
        return 0
    if cents < 100:
        return cents
    pct = 10 if cents >= 10000 else 5 if cents >= 5000 else 0
    if member:
        pct += 5
    if items >= 10:
        pct += 2
    return max(cents - cents * pct // 100, 100)


if __name__ == "__main__":
    print(discounted_total(20000, False, 1))
    print(discounted_total(20000, True, 12))
    print(discounted_total(5000, False, 3))
    print(discounted_total(4999, True, 10))
    print(discounted_total(99, True, 50))
    print(discounted_total(105, True, 10))
    print(discounted_total(-5, False, 1))
    print(discounted_total(3000, False, 0))
