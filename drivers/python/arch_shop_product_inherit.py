from dataclasses import dataclass


@dataclass
class Product:
    name: str
    price: float
    weight_kg: float = 0.0

    def shipping(self) -> float:
        return round(4.0 + 1.5 * self.weight_kg, 2)

    def label(self) -> str:
        return f"{self.name}: {self.price + self.shipping():.2f}"


@dataclass
class BulkyProduct(Product):
    oversize: bool = False

    def shipping(self) -> float:
        cost = super().shipping()
        if self.oversize:
            cost *= 2
        if self.weight_kg > 30:
            cost += 10.0
        return round(cost, 2)


if __name__ == "__main__":
    @dataclass
    class DigitalProduct(Product):
        size_mb: int = 0

        def shipping(self) -> float:
            return 0.0

    items = [Product(name="mug", price=8.5, weight_kg=0.4),
             DigitalProduct(name="ebook", price=12.0, size_mb=5),
             BulkyProduct(name="sofa", price=499.0, weight_kg=45.0, oversize=True),
             BulkyProduct(name="desk", price=150.0, weight_kg=22.0),
             BulkyProduct(name="crate", price=20.0, weight_kg=31.0)]
    for p in items:
        print(f"{p.label()} (ship {p.shipping()})")
