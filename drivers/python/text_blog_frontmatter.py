def parse_front(doc: str) -> dict[str, str]:
    lines = doc.split("\n")
    if lines[0].strip() != "---":
        return {}
    meta = {}
    for i, raw in enumerate(lines[1:], 1):
        line = raw.strip()
        if line == "---":
            meta["_body_lines"] = str(len(lines) - i - 1)
            return meta
        if not line or line.startswith("#") or ":" not in line:
            continue
        key, value = line.split(":", 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        meta[key.strip().lower()] = value
    return {}  # no closing fence


if __name__ == "__main__":
    docs = [
        "---\nTitle: \"Graphs in Jac\"\ndate: 2024-05-01\n# internal note\n\ntags: jac, graphs\n"
        "url: https://x.dev/a:b\n---\nBody line\nmore",
        "no front matter\n---\n",
        "---\ntitle: unterminated",
        "---\nTITLE: 'One'\ntitle: Two\nbroken line\n---",
        "---\n---\nonly body",
    ]
    for d in docs:
        print(sorted(parse_front(d).items()))
