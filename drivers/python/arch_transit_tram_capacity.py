from dataclasses import dataclass
from enum import Enum, auto


class Mode(Enum):
    BUS = auto()
    TRAM = auto()
    FERRY = auto()


@dataclass
class Vehicle:
    code: str
    mode: Mode = Mode.BUS
    seats: int = 40
    standing: int = 20

    def capacity(self, load_factor: float) -> int:
        return int((self.seats + self.standing) * load_factor)

    def describe(self) -> str:
        return f"{self.code} [{self.mode.name}] cap={self.capacity(1.0)}"


@dataclass
class Tram(Vehicle):
    cars: int = 2
    low_floor: bool = False

    def capacity(self, load_factor: float) -> int:
        total = (self.seats + self.standing) * self.cars
        if self.low_floor:
            total -= 6 * self.cars
        return max(0, int(total * load_factor))


if __name__ == "__main__":
    fleet = [Vehicle(code="B12"), Tram(code="T1", mode=Mode.TRAM, seats=30, standing=50),
             Tram(code="T2", mode=Mode.TRAM, seats=24, standing=40, cars=3, low_floor=True),
             Tram(code="T3", mode=Mode.TRAM, seats=4, standing=0, cars=1, low_floor=True),
             Vehicle(code="F1", mode=Mode.FERRY, seats=200, standing=0)]
    for v in fleet:
        print(v.describe(), v.capacity(0.75))
