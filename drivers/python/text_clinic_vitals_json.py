def vitals_json(vitals: dict[str, int | str | None]) -> str:
    parts = []
    for key in sorted(vitals):
        value = vitals[key]
        if value is None:
            text = "null"
        elif isinstance(value, int):
            text = str(value)
        else:
            text = f'"{value}"'
        parts.append(f'"{key}": {text}')
    return "{" + ", ".join(parts) + "}"


if __name__ == "__main__":
    print(vitals_json({"hr": 72, "bp": "120/80", "temp": None}))
    print(vitals_json({}))
    print(vitals_json({"spo2": 97}))
    print(vitals_json({"note": "stable", "rr": 16, "allergy": "none"}))
