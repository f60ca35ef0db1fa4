def card_slug(prefix: str, number: int, title: str, max_len: int) -> str:
    head = f"{prefix.upper()}-{number:04d}"
    chars = []
    for ch in title.lower():
        if ch.isalnum():
            chars.append(ch)
        elif chars and chars[-1] != "-":
            chars.append("-")
    body = "".join(chars).strip("-")
    if not body:
        return head
    slug = f"{head}-{body}"
    return slug[:max_len].rstrip("-") if len(slug) > max_len else slug


if __name__ == "__main__":
    print(card_slug("kb", 42, "Fix login bug!", 40))
    print(card_slug("ops", 7, "  Deploy -- v2.1 (hotfix)  ", 40))
    print(card_slug("kb", 12345, "Refactor the enormous settings page layout", 24))
    print(card_slug("kb", 3, "!!!", 30))
    print(card_slug("web", 9, "Add dark mode toggle", 18))
