def level_info(xp: int) -> str:
    xp = max(xp, 0)
    level = sum(1 for t in THRESHOLDS if t <= xp)
    if level >= len(THRESHOLDS):
        return f"Lv{level} MAX"
    lo, hi = THRESHOLDS[level - 1], THRESHOLDS[level]
    pct = 100 * (xp - lo) // (hi - lo)
    filled = pct // 10
    return f"Lv{level} [{'#' * filled}{'.' * (10 - filled)}] {pct}%"


if __name__ == "__main__":
    THRESHOLDS = [0, 100, 250, 450, 700, 1000]
    for xp in [-20, 0, 99, 100, 175, 449, 450, 999, 1000, 5000]:
        print(f"{xp}: {level_info(xp)}")
