def zone(bpm: object, max_hr: int) -> str:
    match bpm:
        case bool():
            raise ReadingError(detail="not a number")
        case int() as n if n < 30 or n > 250:
            raise ReadingError(detail=f"implausible {n}")
        case int() as n:
            pct = n * 100 // max_hr
            if pct < 50:
                return "rest"
            if pct < 70:
                return "easy"
            if pct < 85:
                return "tempo"
            return "max"
        case _:
            raise ReadingError(detail="not a number")


if __name__ == "__main__":
    from dataclasses import dataclass

    @dataclass
    class ReadingError(Exception):
        detail: str = ""

    readings = [60, 95, 120, 150, 175, 29, 300, "fast", True, 250, 30]
    errors = 0
    for r in readings:
        try:
            print(f"{r}: {zone(r, 190)}")
        except ReadingError as e:
            errors += 1
            print(f"{r}: error {e.detail}")
    print(f"errors={errors}")
