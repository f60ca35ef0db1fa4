def column_json(name: str, cards: list["Card"]) -> str:
    items = []
    for c in cards:
        tags = ",".join(f'"{esc(t)}"' for t in sorted(c.tags))
        items.append(f'{{"title":"{esc(c.title)}","points":{c.points},"tags":[{tags}]}}')
    return '{"column":"' + esc(name) + '","cards":[' + ",".join(items) + "]}"


if __name__ == "__main__":
    from dataclasses import dataclass, field

    @dataclass
    class Card:
        title: str
        points: int = 0
        tags: list[str] = field(default_factory=list)

    def esc(s: str) -> str:
        return s.replace("\\", "\\\\").replace('"', '\\"')

    print(column_json("Todo", []))
    print(column_json("Doing", [Card(title="api", points=3, tags=["backend", "urgent"]),
                                Card(title='say "hi"')]))
    print(column_json("Q\\A", [Card(title="x", points=1, tags=["z", "a"])]))
