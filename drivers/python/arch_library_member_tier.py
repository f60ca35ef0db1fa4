from dataclasses import dataclass
from enum import Enum, auto


class Tier(Enum):
    BASIC = auto()
    SILVER = auto()
    GOLD = auto()


@dataclass
class Member:
    name: str
    tier: Tier = Tier.BASIC
    loans: int = 0
    fines: float = 0.0

    def limit(self) -> int:
        base = {Tier.BASIC: 3, Tier.SILVER: 6, Tier.GOLD: 10}[self.tier]
        if self.fines > 5.0:
            base //= 2
        return base

    def can_borrow(self) -> bool:
        return self.loans < self.limit()


if __name__ == "__main__":
    people = [Member(name="Ann"), Member(name="Bo", tier=Tier.SILVER, loans=6),
              Member(name="Cy", tier=Tier.GOLD, loans=4, fines=6.0),
              Member(name="Di", tier=Tier.GOLD, loans=5, fines=7.5),
              Member(name="Ed", tier=Tier.BASIC, loans=0, fines=5.0),
              Member(name="Flo", tier=Tier.SILVER, loans=2, fines=9.0)]
    for m in people:
        print(f"{m.name} {m.tier.name} limit={m.limit()} can_borrow={m.can_borrow()}")
