def merge(template: str, fields: dict[str, str]) -> str:
    out = ""
    i = 0
    while i < len(template):
        start = template.find("{{", i)
        end = template.find("}}", start + 2) if start != -1 else -1
        if end == -1:
            out += template[i:]
            break
        out += template[i:start]
        tag = template[start + 2:end].strip()
        if "|" in tag:
            key, default = tag.split("|", 1)
            out += fields.get(key.strip(), "") or default.strip()
        elif tag in fields:
            out += fields[tag]
        else:
            out += template[start:end + 2]  # unknown tags stay as written
        i = end + 2
    return out


if __name__ == "__main__":
    t1 = "Hi {{ first_name|friend }}, your plan is {{plan}}. {{unknown}} stays."
    t2 = "Code: {{code}} / {{ city|somewhere }} / {broken} / {{open"
    people = [{"first_name": "Ana", "plan": "pro", "code": "X1"},
              {"first_name": "", "plan": "", "city": "Oslo"}, {}]
    for p in people:
        print(merge(t1, p))
        print(merge(t2, p))
    print(merge("", {"a": "b"}) == "")
