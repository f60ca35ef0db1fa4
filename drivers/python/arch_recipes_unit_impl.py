from dataclasses import dataclass
from enum import Enum, auto


class Unit(Enum):
    G = auto()
    KG = auto()
    CUP = auto()
    TBSP = auto()
    TSP = auto()


ML_PER = {Unit.CUP: 240, Unit.TBSP: 15, Unit.TSP: 5}


@dataclass
class Quantity:
    amount: float
    unit: Unit = Unit.G
    density: float = 1.0

    def to_grams(self) -> float:
        if self.unit == Unit.G:
            return round(self.amount, 1)
        if self.unit == Unit.KG:
            return round(self.amount * 1000, 1)
        return round(self.amount * ML_PER[self.unit] * self.density, 1)

    def describe(self) -> str:
        return f"{self.amount} {self.unit.name.lower()} = {self.to_grams()}g"


if __name__ == "__main__":
    qs = [Quantity(amount=250.0), Quantity(amount=1.25, unit=Unit.KG),
          Quantity(amount=2.0, unit=Unit.CUP, density=0.53),
          Quantity(amount=0.5, unit=Unit.CUP), Quantity(amount=3.0, unit=Unit.TBSP, density=0.85),
          Quantity(amount=1.0, unit=Unit.TSP, density=1.2), Quantity(amount=0.0, unit=Unit.KG)]
    for q in qs:
        print(q.describe())
