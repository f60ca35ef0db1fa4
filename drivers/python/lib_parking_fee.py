def parking_fee(entry_min: int, exit_min: int, hourly: int, daily_cap: int, validated: bool) -> int:
    if exit_min < entry_min:
        return -1
    minutes = exit_min - entry_min
    if minutes <= 15:
        return 0
    days, rest = divmod(minutes, 1440)
    started_hours = -(-rest // 60)
    fee = days * daily_cap + min(daily_cap, started_hours * hourly)
    return fee // 2 if validated else fee


if __name__ == "__main__":
    cases = [(0, 10, False), (0, 16, False), (0, 60, False), (0, 61, True), (100, 700, False),
             (0, 1440, False), (0, 1500, False), (0, 3000, True), (50, 20, False)]
    for a, b, v in cases:
        print(f"{a}->{b} validated={v}: {parking_fee(a, b, 250, 1800, v)}")
