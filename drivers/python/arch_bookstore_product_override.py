from dataclasses import dataclass, field


@dataclass
class Product:
    title: str
    price: float

    def final_price(self) -> float:
        return round(self.price, 2)

    def label(self) -> str:
        return f"{self.title} @ {self.final_price():.2f}"


@dataclass
class Bundle(Product):
    parts: list[Product] = field(default_factory=list)

    def final_price(self) -> float:
        if not self.parts:
            return round(self.price, 2)
        return round(sum(p.final_price() for p in self.parts) * 0.8, 2)


if __name__ == "__main__":
    @dataclass
    class Ebook(Product):
        size_mb: int = 1

        def label(self) -> str:
            return f"[e] {self.title} ({self.size_mb}MB) @ {self.final_price():.2f}"

    dune = Product(title="Dune", price=10.0)
    emma = Ebook(title="Emma", price=3.333, size_mb=2)
    inner = Bundle(title="Mini", price=99.0, parts=[emma, Product(title="Odes", price=6.5)])
    big = Bundle(title="Mega", price=1.0, parts=[dune, inner])
    empty = Bundle(title="Empty", price=4.444)
    for p in [dune, emma, inner, big, empty]:
        print(p.label())
