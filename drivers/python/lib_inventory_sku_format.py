def make_sku(category: str, number: int, variant: str) -> str:
    prefix = category.strip().upper()[:3].ljust(3, "X")
    code = f"{prefix}-{max(number, 0):05d}"
    variant = variant.strip()
    if variant:
        code += "-" + variant.upper()
    return code


if __name__ == "__main__":
    cases = [("bolts", 42, "m8"), ("  gear ", 7, ""), ("ax", 123456, " lg "), ("", -3, "x"),
             ("nuts", 0, "   ")]
    for c in cases:
        print(make_sku(c[0], c[1], c[2]))
