def render(template: str, values: dict[str, str]) -> str:
    out = ""
    i, n = 0, len(template)
    while i < n:
        ch = template[i]
        nxt = template[i + 1] if i + 1 < n else ""
        if ch in "{}" and nxt == ch:  # a doubled brace is a literal one
            out += ch
            i += 2
        elif ch == "{":
            end = template.find("}", i)
            if end == -1:
                out += template[i:]
                break
            key = template[i + 1:end]
            out += values.get(key, "{" + key + "}")
            i = end + 1
        else:
            out += ch
            i += 1
    return out


if __name__ == "__main__":
    vals = {"name": "Ann", "total": "12.50", "id": "A-7"}
    print(render("Thanks {name}! Order {id} total ${total}.", vals))
    print(render("Literal {{braces}} stay, {missing} too", vals))
    print(render('json: {{"id": "{id}"}}', vals))
    print(render("broken {name", vals))
    print(render("", vals))
