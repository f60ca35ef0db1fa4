from dataclasses import dataclass, field
from enum import Enum, auto


class Rank(Enum):
    NEWBIE = auto()
    REGULAR = auto()
    TRUSTED = auto()
    VETERAN = auto()


@dataclass
class Member:
    name: str
    posts: int = 0
    upvotes: int = 0
    strikes: int = 0
    rep: int = field(init=False)

    def __post_init__(self) -> None:
        self.rep = self.posts + 2 * self.upvotes - 10 * self.strikes

    def rank(self) -> Rank:
        if self.strikes >= 3 or self.rep < 10:
            return Rank.NEWBIE
        if self.rep < 100:
            return Rank.REGULAR
        if self.rep < 500:
            return Rank.TRUSTED
        return Rank.VETERAN

    def badge(self) -> str:
        return f"{self.name} [{self.rank().name.lower()}] rep={self.rep}"


if __name__ == "__main__":
    @dataclass
    class Moderator(Member):
        since: int = 2020

        def rank(self) -> Rank:
            return Rank.VETERAN if self.since <= 2018 else Rank.TRUSTED

    people = [Member(name="ana"), Member(name="ben", posts=8, upvotes=1),
              Member(name="cai", posts=40, upvotes=30),
              Member(name="dev", posts=300, upvotes=150, strikes=1),
              Member(name="eli", posts=900, upvotes=400, strikes=3),
              Member(name="fay", posts=10, upvotes=0, strikes=0),
              Moderator(name="gus", posts=2, since=2017),
              Moderator(name="hal", posts=5000, since=2022)]
    for p in people:
        print(p.badge())
