def parse_line(line: str) -> str:
    tokens = line.split()
    if not tokens:
        return "empty"
    qty = 0.0
    i = 0
    while i < len(tokens) and tokens[i].replace("/", "", 1).isdigit():
        if "/" in tokens[i]:
            num, den = tokens[i].split("/")
            qty += int(num) / int(den)
        else:
            qty += int(tokens[i])
        i += 1
    unit = "each"
    if i < len(tokens) and tokens[i].lower() in UNITS:
        unit = tokens[i].lower().removesuffix("s")
        i += 1
    if qty <= 0:
        qty = 1.0
    return f"{' '.join(tokens[i:])}|{qty:.2f}|{unit}"


if __name__ == "__main__":
    UNITS = ["cup", "cups", "tbsp", "tsp", "g", "kg", "ml"]
    for line in ["2 cups flour", "1 1/2 tbsp olive oil", "3 eggs", "1/4 TSP Salt",
                 "pinch of pepper",
                 "500 g dark chocolate", "   ", "2 Cup sugar"]:
        print(parse_line(line))
