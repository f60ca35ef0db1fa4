from dataclasses import dataclass
from enum import Enum, auto
from typing import ClassVar


class RoomType(Enum):
    SINGLE = auto()
    DOUBLE = auto()
    SUITE = auto()


class Season(Enum):
    LOW = auto()
    MID = auto()
    HIGH = auto()


@dataclass
class Room:
    number: int
    kind: RoomType = RoomType.SINGLE
    sea_view: bool = False
    base_rates: ClassVar[dict[str, int]] = {"SINGLE": 90, "DOUBLE": 130, "SUITE": 260}

    def nightly(self, season: Season, loyalty_years: int) -> int:
        rate = Room.base_rates[self.kind.name]
        match season:
            case Season.LOW:
                pct = 80
            case Season.HIGH:
                pct = 135
            case _:
                pct = 100
        rate = rate * pct // 100
        if self.sea_view:
            rate += 25
        off = min(10, 2 * loyalty_years)
        return rate * (100 - off) // 100

    def label(self) -> str:
        return f"#{self.number} {self.kind.name.lower()}{' +view' if self.sea_view else ''}"


if __name__ == "__main__":
    rooms = [Room(number=101), Room(number=204, kind=RoomType.DOUBLE, sea_view=True),
             Room(number=501, kind=RoomType.SUITE)]
    for r in rooms:
        cases = [(Season.LOW, 0), (Season.MID, 1), (Season.HIGH, 3), (Season.HIGH, 9)]
        row = [r.nightly(s, y) for s, y in cases]
        print(r.label(), row)
