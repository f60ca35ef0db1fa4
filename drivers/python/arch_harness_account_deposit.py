from dataclasses import dataclass, field


@dataclass
class Account:
    owner: str
    balance: int = 0
    history: list[int] = field(default_factory=list)

    def deposit(self, amount: int) -> bool:
        if amount <= 0:
            return False
        self.balance += amount
        self.history.append(amount)
        return True


if __name__ == "__main__":
    @dataclass
    class Ledger:
        rows: list[str] = field(default_factory=list)

        def deposit(self, note: str) -> None:
            self.rows.append(note)

    acct = Account(owner="ana")
    print([acct.deposit(a) for a in [50, 0, -5, 20]])
    print(acct.balance, acct.history)
    led = Ledger()
    led.deposit("x")
    print(led.rows)
