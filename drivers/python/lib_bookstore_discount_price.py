def line_price(unit: float, qty: int, member: bool) -> str:
    if qty <= 0:
        return "$0.00"
    pct = 15 if qty >= 10 else 10 if qty >= 5 else 0
    if member:
        pct += 5
    net = round(unit * qty * (100 - pct) / 100, 2)
    return f"${net:.2f}"


if __name__ == "__main__":
    cases = [(12.5, 1, False), (12.5, 1, True), (8.0, 5, False), (8.0, 5, True),
             (3.99, 10, False), (3.99, 12, True), (20.0, 0, True), (20.0, -2, False)]
    for u, q, m in cases:
        print(f"{u} x{q} member={m}: {line_price(u, q, m)}")
