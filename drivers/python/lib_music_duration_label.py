def duration_label(total_seconds: int) -> str:
    if total_seconds <= 0:
        return "0:00"
    hours, rest = divmod(total_seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours == 0:
        return f"{minutes}:{seconds:02d}"
    return f"{hours}:{minutes:02d}:{seconds:02d}"


if __name__ == "__main__":
    for t in [0, 7, 59, 60, 185, 3599, 3600, 3661, 45296, -10]:
        print(f"{t} -> {duration_label(t)}")
