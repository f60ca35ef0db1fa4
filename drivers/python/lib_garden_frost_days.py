def planting_advice(month: int, day: int, frost_month: int, frost_day: int, hardy: bool) -> str:
    gap = day_of_year(frost_month, frost_day) - day_of_year(month, day)
    delay = gap - 14 if hardy else gap + 1
    if delay <= 0:
        return "plant now"
    return f"wait {delay} {'day' if delay == 1 else 'days'}"


if __name__ == "__main__":
    MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]

    def day_of_year(month: int, day: int) -> int:
        return sum(MONTH_DAYS[:month - 1]) + day

    cases = [(3, 1, 4, 15, True), (3, 1, 4, 15, False), (4, 1, 4, 15, True), (4, 14, 4, 15, False),
             (4, 15, 4, 15, False), (4, 16, 4, 15, False), (3, 31, 4, 15, True),
             (1, 10, 5, 1, False)]
    for m, d, fm, fd, h in cases:
        kind = "hardy" if h else "tender"
        print(f"{m}/{d} frost {fm}/{fd} {kind}: {planting_advice(m, d, fm, fd, h)}")
