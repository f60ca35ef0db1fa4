from dataclasses import dataclass


@dataclass
class Fare:
    code: str
    base: int
    change_fee: int = 75

    def change_cost(self, days_out: int) -> int:
        return self.change_fee if days_out >= 0 else -1

    def refund(self, days_out: int) -> int:
        return 0

    def show(self, days_out: int) -> str:
        return (f"{type(self).__name__}({self.code}) d={days_out}: "
                f"change={self.change_cost(days_out)} refund={self.refund(days_out)}")


@dataclass
class Flex(Fare):
    refundable_pct: int = 80

    def change_cost(self, days_out: int) -> int:
        return 0 if days_out >= 0 else -1

    def refund(self, days_out: int) -> int:
        if days_out < 0:
            return 0
        if days_out >= 14:
            return self.base
        part = self.base * self.refundable_pct // 100
        return max(0, part - super().change_cost(days_out) // 2)


if __name__ == "__main__":
    @dataclass
    class Basic(Fare):
        def change_cost(self, days_out: int) -> int:
            return -1

    fares = [Fare(code="Y", base=400), Flex(code="B", base=900, change_fee=100),
             Flex(code="M", base=60, refundable_pct=50), Basic(code="N", base=120)]
    for f in fares:
        for d in [30, 14, 3, -1]:
            print(f.show(d))
