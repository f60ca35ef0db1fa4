def render(template: str, fields: dict[str, str]) -> str:
    out = []
    i = 0
    while i < len(template):
        start = template.find("{", i)
        end = template.find("}", start) if start != -1 else -1
        if end == -1:
            out.append(template[i:])
            break
        out.append(template[i:start])
        name = template[start + 1:end]
        out.append(fields.get(name, "{" + name + "}"))
        i = end + 1
    return "".join(out)


if __name__ == "__main__":
    fields = {"name": "Ann", "total": "$12.50", "n": "3"}
    tpls = ["Thanks {name}!", "{n} books, total {total}", "Dear {nobody}, {name}", "no fields here",
            "open {name brace", "{name}{name}", "tail {", ""]
    for t in tpls:
        print(f"[{render(t, fields)}]")
