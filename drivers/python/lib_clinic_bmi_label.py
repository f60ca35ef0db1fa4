def bmi_label(weight_kg: float, height_cm: int) -> str:
    if height_cm <= 0 or weight_kg <= 0:
        return "n/a"
    meters = height_cm / 100
    bmi = round(weight_kg / (meters * meters), 1)
    if bmi < 18.5:
        category = "underweight"
    elif bmi < 25:
        category = "normal"
    elif bmi < 30:
        category = "overweight"
    else:
        category = "obese"
    return f"{bmi} {category}"


if __name__ == "__main__":
    for w, h in [(70.0, 175), (50.0, 180), (85.0, 170), (120.0, 165), (60.0, 0), (-1.0, 170),
                 (66.8, 190)]:
        print(f"{w}kg {h}cm -> {bmi_label(w, h)}")
