def due_label(day_of_year: int) -> str:
    if not 1 <= day_of_year <= 365:
        return "invalid"
    remaining, month = day_of_year, 0
    while remaining > DAYS_IN[month]:
        remaining -= DAYS_IN[month]
        month += 1
    return f"{MONTHS[month]} {remaining:02d}"


if __name__ == "__main__":
    MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    DAYS_IN = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    for d in [1, 31, 32, 59, 60, 200, 334, 365, 0, 366]:
        print(f"{d} -> {due_label(d)}")
