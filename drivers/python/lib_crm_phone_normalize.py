def normalize_phone(raw: str, default_cc: str) -> str:
    s = raw.strip()
    digits = "".join(c for c in s if c.isdigit())
    if s.startswith("+") or s.startswith("00"):
        if s.startswith("00"):
            digits = digits[2:]
    else:
        if digits.startswith("0"):
            digits = digits[1:]
        digits = default_cc + digits
    if not 8 <= len(digits) <= 15:
        return "invalid"
    return "+" + digits


if __name__ == "__main__":
    for r in ["+44 20 7946 0958", "020 7946 0958", "0044-20-7946-0958", "(555) 123-4567", "12",
              "+1 (800) FLOWERS 12", "  0 0 1 2 3 4 5 6 7 8  "]:
        print(f"{r.strip()!r} -> {normalize_phone(r, '44')}")
    print(normalize_phone("555 123 4567", "1"))
