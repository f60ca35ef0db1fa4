def normalize_handle(raw: str) -> str:
    handle = raw.strip()
    if handle.startswith("@"):
        handle = handle[1:]
    handle = handle.lower()
    if not handle:
        return "error: empty"
    if not 3 <= len(handle) <= 15:
        return "error: length"
    if handle[0].isdigit():
        return "error: leading digit"
    if any(not (ch == "_" or "a" <= ch <= "z" or "0" <= ch <= "9") for ch in handle):
        return "error: bad char"
    return "@" + handle


if __name__ == "__main__":
    samples = ["  @Ana_Lee ", "bob", "@", "   ", "ab", "@9lives", "way_too_long_handle_x",
               "hello world", "Zoë", "@@double", "dev_42", "MiXeD123"]
    for s in samples:
        print(f"[{s}] -> {normalize_handle(s)}")
