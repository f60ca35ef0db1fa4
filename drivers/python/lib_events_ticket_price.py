def quote_cents(base_cents: int, qty: int, days_before: int, promo: str) -> int:
    if qty <= 0:
        return 0
    unit = base_cents * 80 // 100 if days_before >= 30 else base_cents
    subtotal = unit * qty
    if qty >= 10:
        subtotal = subtotal * 90 // 100
    if promo == "HALF":
        subtotal //= 2
    fee = 0 if promo == "FREEFEE" else min(150 * qty, 1000)
    return subtotal + fee


if __name__ == "__main__":
    def fmt(cents: int) -> str:
        return f"${cents // 100}.{cents % 100:02d}"

    cases = [(2500, 1, 5, ""), (2500, 2, 45, ""), (1999, 10, 0, ""), (1999, 12, 60, "FREEFEE"),
             (4000, 3, 30, "HALF"), (4000, 0, 90, "HALF"), (999, 7, 29, "BOGUS")]
    for b, q, d, p in cases:
        print(f"base={fmt(b)} qty={q} days={d} promo={p or '-'} -> {fmt(quote_cents(b, q, d, p))}")
