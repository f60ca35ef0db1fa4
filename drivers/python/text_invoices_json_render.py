def render_invoice(number: str, client: str, lines: list[tuple[str, int]], paid: bool) -> str:
    items = ",".join(f'{{"desc":{json_str(desc)},"cents":{cents}}}' for desc, cents in lines)
    total = sum(cents for _, cents in lines)
    return (f'{{"number":{json_str(number)},"client":{json_str(client)},"lines":[{items}],'
            f'"total":{total},"paid":{"true" if paid else "false"}}}')


if __name__ == "__main__":
    def json_str(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    print(render_invoice("INV-7", "Acme", [("hosting", 5997), ("setup", 1000)], False))
    print(render_invoice("INV-8", 'Bo "the" Builder', [], True))
    print(render_invoice("INV-9", "C\\D", [("a", 1)], True))
