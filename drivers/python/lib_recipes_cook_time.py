def cook_time(minutes: int) -> str:
    if minutes < 0:
        return "-"
    if minutes == 0:
        return "0m"
    hours, mins = divmod(minutes, 60)
    if hours == 0:
        return f"{mins}m"
    if mins == 0:
        return f"{hours}h"
    return f"{hours}h {mins}m"


if __name__ == "__main__":
    for mins in [0, 5, 45, 60, 61, 90, 120, 135, 600, -3]:
        print(f"{mins} -> {cook_time(mins)}")
