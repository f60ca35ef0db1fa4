def add_days(year: int, month: int, day: int, days: int) -> str:
    d, m, y = day + days, month, year
    while True:
        days_in_month = 29 if m == 2 and is_leap(y) else MONTH_DAYS[m - 1]
        if d <= days_in_month:
            break
        d -= days_in_month
        m += 1
        if m > 12:
            m, y = 1, y + 1
    return f"{y:04d}-{m:02d}-{d:02d}"


if __name__ == "__main__":
    MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]

    def is_leap(year: int) -> bool:
        return (year % 4 == 0 and year % 100 != 0) or year % 400 == 0

    print(add_days(2024, 1, 15, 30))
    print(add_days(2024, 2, 10, 20))
    print(add_days(2023, 2, 10, 20))
    print(add_days(2023, 12, 20, 15))
    print(add_days(2024, 3, 31, 0))
    print(add_days(1900, 2, 28, 1))
    print(add_days(2000, 2, 28, 1))
    print(add_days(2024, 11, 30, 400))
