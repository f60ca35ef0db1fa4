from dataclasses import dataclass, field


@dataclass
class Invoice:
    number: str
    items: list["LineItem"] = field(default_factory=list)
    discount_cents: int = 0

    def total(self) -> int:
        net = sum(item.net() for item in self.items)
        tax = sum(item.tax_cents() for item in self.items)
        return max(net - self.discount_cents, 0) + tax

    def summary(self) -> str:
        cents = self.total()
        return f"{self.number}: {len(self.items)} items, total {cents // 100}.{cents % 100:02d}"


if __name__ == "__main__":
    from enum import Enum, auto

    class TaxClass(Enum):
        STANDARD = auto()
        REDUCED = auto()
        EXEMPT = auto()

    @dataclass
    class LineItem:
        desc: str
        qty: int = 1
        unit_cents: int = 0
        tax: TaxClass = TaxClass.STANDARD

        def net(self) -> int:
            return self.qty * self.unit_cents

        def tax_cents(self) -> int:
            if self.tax == TaxClass.EXEMPT:
                return 0
            rate = 20 if self.tax == TaxClass.STANDARD else 5
            return self.net() * rate // 100

    a = Invoice(number="INV-1", items=[LineItem(desc="hosting", qty=3, unit_cents=1999),
                                       LineItem(desc="book", qty=1, unit_cents=2500,
                                                tax=TaxClass.REDUCED),
                                       LineItem(desc="donation", unit_cents=1000,
                                                tax=TaxClass.EXEMPT)])
    b = Invoice(number="INV-2", items=[LineItem(desc="pen", qty=2, unit_cents=150)],
                discount_cents=500)
    c = Invoice(number="INV-3")
    d = Invoice(number="INV-4", items=[LineItem(desc="desk", unit_cents=30000)],
                discount_cents=1234)
    for inv in [a, b, c, d]:
        print(inv.summary())
