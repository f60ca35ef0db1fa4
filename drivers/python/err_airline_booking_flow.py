def book(f: "Flight", seats: int, card: str, price: int) -> str:
    if seats < 1:
        raise ValueError("seats must be positive")
    if seats > f.free:
        raise SoldOut(msg=f"only {f.free} left")
    f.held += seats
    try:
        charge(card, seats * price)
        f.free -= seats
        return f"booked {seats} on {f.number}"
    except PaymentDeclined as e:
        return f"declined: {e.msg} ({e.amount})"
    finally:
        f.held -= seats  # the hold is released whatever happened


if __name__ == "__main__":
    from dataclasses import dataclass

    @dataclass
    class BookingError(Exception):
        msg: str

    @dataclass
    class SoldOut(BookingError):
        pass

    @dataclass
    class PaymentDeclined(BookingError):
        amount: int = 0

    @dataclass
    class Flight:
        number: str
        free: int
        held: int = 0

    def charge(card: str, amount: int) -> None:
        if not card.startswith("4"):
            raise PaymentDeclined(msg="card rejected", amount=amount)
        if amount > 2000:
            raise PaymentDeclined(msg="over limit", amount=amount)

    f = Flight(number="UA88", free=5)
    for n, card in [(2, "4111"), (1, "5500"), (4, "4111"), (3, "4000"), (0, "4111"), (1, "4111"),
                    (1, "4111")]:
        try:
            print(book(f, n, card, 700))
        except SoldOut as e:
            print(f"sold out: {e.msg}")
        except BookingError as e:
            print(f"other: {e.msg}")
        except ValueError as e:
            print(f"value error: {e}")
        print(f"  free={f.free} held={f.held}")
