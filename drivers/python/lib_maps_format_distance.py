def format_distance(meters: int, imperial: bool) -> str:
    if meters < 0:
        return "invalid"
    if imperial:
        feet = meters * 3281 // 1000
        return f"{feet} ft" if feet < 1000 else f"{meters / 1609.344:.1f} mi"
    if meters < 1000:
        return f"{meters // 10 * 10} m"
    if meters < 100000:
        return f"{meters / 1000:.1f} km"
    return f"{meters // 1000} km"


if __name__ == "__main__":
    def walk_minutes(meters: int) -> int:
        return (meters + 79) // 80

    for m in [0, 7, 95, 999, 1000, 1249, 15780, 99999, 250400, -5]:
        print(f"{m}: {format_distance(m, False)} | {format_distance(m, True)} | "
              f"walk {walk_minutes(max(m, 0))} min")
