from dataclasses import dataclass
from enum import Enum, auto


class Unit(Enum):
    PIECE = auto()
    BOX = auto()
    PALLET = auto()


@dataclass
class StockItem:
    sku: str
    unit: Unit = Unit.PIECE
    count: int = 0
    unit_price: float = 0.0

    def pieces(self) -> int:
        if self.unit == Unit.BOX:
            return self.count * 12
        if self.unit == Unit.PALLET:
            return self.count * 480
        return self.count

    def value(self) -> float:
        if self.count <= 0:
            return 0.0
        total = self.pieces() * self.unit_price
        if self.unit == Unit.PALLET:
            total *= 0.95
        return round(total, 2)


if __name__ == "__main__":
    items = [StockItem(sku="BOLT", count=100, unit_price=0.12),
             StockItem(sku="NUT", unit=Unit.BOX, count=3, unit_price=0.05),
             StockItem(sku="GEAR", unit=Unit.PALLET, count=2, unit_price=1.5),
             StockItem(sku="PIN", unit=Unit.BOX, count=0, unit_price=9.0),
             StockItem(sku="CHIP", count=-4, unit_price=3.0)]
    for it in items:
        print(f"{it.sku} {it.unit.name} pieces={it.pieces()} value={it.value()}")
