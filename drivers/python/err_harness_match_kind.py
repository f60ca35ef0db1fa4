def classify(value: object) -> str:
    match value:
        case 0:
            return "zero"
        case int() as n if n < 0:
            return f"neg:{n}"
        case [a, b]:
            return f"pair:{a}+{b}"
        case _:
            try:
                return f"int:{int(value)}"
            except (ValueError, TypeError):
                return "bad"


if __name__ == "__main__":
    for v in [0, -4, [1, 2], "17", "x", None, 9]:
        print(classify(v))
