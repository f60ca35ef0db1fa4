def income_tax(gross: int) -> int:
    if gross <= 0:
        return 0
    tax = 0
    lower = 0
    for upper, rate in BRACKETS:
        if gross <= lower:
            break
        tax += (min(gross, upper) - lower) * rate // 100
        lower = upper
    if gross > lower:
        tax += (gross - lower) * TOP_RATE // 100
    return tax


if __name__ == "__main__":
    BRACKETS = [(10000, 0), (40000, 10), (90000, 20)]
    TOP_RATE = 35

    def net_pay(gross: int, pension_pct: int) -> int:
        pension = gross * pension_pct // 100
        return gross - pension - income_tax(gross - pension)

    for g in [0, 8000, 10000, 25000, 40000, 60000, 90000, 150000, -100]:
        print(f"{g}: tax={income_tax(g)} net={net_pay(g, 5)}")
