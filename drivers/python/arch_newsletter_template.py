from dataclasses import dataclass


@dataclass
class Block:
    kind: str = "block"

    def render(self, ctx: dict[str, str]) -> str:
        return f"[{self.kind}]"


@dataclass
class Greeting(Block):
    fallback: str = "there"

    def render(self, ctx: dict[str, str]) -> str:
        name = (ctx.get("first_name", "").strip() or self.fallback).capitalize()
        if ctx.get("plan", "") == "pro":
            return f"Hi {name}, thanks for going Pro!"
        return f"Hi {name},"


if __name__ == "__main__":
    @dataclass
    class Heading(Block):
        text: str = ""
        level: int = 1

        def render(self, ctx: dict[str, str]) -> str:
            return "#" * self.level + " " + self.text.upper()

    blocks = [Heading(text="May digest", level=2), Greeting(), Block(kind="footer")]
    readers = [{"first_name": "ana", "plan": "pro"}, {"first_name": "  "}, {},
               {"first_name": "BEN", "plan": "free"}]
    for r in readers:
        print(" | ".join(b.render(r) for b in blocks))
    print(Greeting(fallback="friend").render({"plan": "pro"}))
