from dataclasses import dataclass, field

WEIGHTS = {"LIKE": 1, "LOVE": 3, "LAUGH": 2, "ANGRY": -1}


@dataclass
class Post:
    author: str
    reactions: dict[str, int] = field(default_factory=dict)
    reports: int = 0

    def react(self, r: "Reaction") -> None:
        self.reactions[r.name] = self.reactions.get(r.name, 0) + 1

    def score(self) -> int:
        total = sum(w * self.reactions.get(name, 0) for name, w in WEIGHTS.items())
        return max(total - 5 * self.reports, 0)


if __name__ == "__main__":
    from enum import Enum, auto

    class Reaction(Enum):
        LIKE = auto()
        LOVE = auto()
        LAUGH = auto()
        ANGRY = auto()

    @dataclass
    class SponsoredPost(Post):
        boost: int = 10

        def score(self) -> int:
            return super().score() + self.boost

    a = Post(author="ana")
    b = Post(author="ben", reports=1)
    c = SponsoredPost(author="acme", boost=7)
    d = Post(author="dev")
    for r in [Reaction.LIKE, Reaction.LOVE, Reaction.LOVE, Reaction.LAUGH]:
        a.react(r)
    for r in [Reaction.LIKE, Reaction.ANGRY, Reaction.ANGRY]:
        b.react(r)
    for r in [Reaction.LAUGH, Reaction.ANGRY]:
        c.react(r)
    for r in [Reaction.LOVE, Reaction.LOVE, Reaction.LOVE]:
        d.react(r)
    d.reports = 1
    for p in [a, b, c, d]:
        print(f"{p.author}: {p.score()} {sorted(p.reactions.items())}")
