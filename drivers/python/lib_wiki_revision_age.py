def revision_age(edited_at: int, now: int) -> str:
    diff = now - edited_at
    if diff < 0:
        return "in the future"
    for unit, size in [("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60)]:
        if diff >= size:
            n = diff // size
            return f"{n} {unit}{'' if n == 1 else 's'} ago"
    return "just now"


if __name__ == "__main__":
    now = 1700000000
    for delta in [-5, 0, 59, 60, 119, 3599, 3600, 7300, 86399, 86400, 200000, 604800, 2000000]:
        print(f"{delta}: {revision_age(now - delta, now)}")
