def slugify(title: str, taken: list[str], max_len: int) -> str:
    words = []
    current = ""
    for ch in title.lower():
        if "a" <= ch <= "z" or "0" <= ch <= "9":
            current += ch
        elif current:
            words.append(current)
            current = ""
    if current:
        words.append(current)
    slug = "-".join(words)[:max_len].rstrip("-") or "thread"
    candidate = slug
    n = 2
    while candidate in taken:
        candidate = f"{slug}-{n}"
        n += 1
    return candidate


if __name__ == "__main__":
    taken = ["hello-world", "hello-world-2", "thread"]
    cases = [("Hello, World!", 40), ("  Rust vs. Jac: 2024 edition ", 40), ("???", 40),
             ("Ünicode café talk", 40), ("A very long title about many things", 12),
             ("hello world", 40), ("ab  cd", 3), ("Top 10", 40)]
    for t, m in cases:
        print(f"{t!r} -> {slugify(t, taken, m)}")
