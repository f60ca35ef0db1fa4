def withdraw(sku: str, qty: int) -> int:
    if qty <= 0:
        raise ValueError("qty must be positive")
    if sku not in stock:
        raise KeyError(sku)
    available = stock[sku]
    if available < qty:
        raise InsufficientStock(sku=sku, wanted=qty, available=available)
    stock[sku] = available - qty
    return stock[sku]


if __name__ == "__main__":
    from dataclasses import dataclass

    @dataclass
    class InsufficientStock(Exception):
        sku: str
        wanted: int
        available: int

    stock = {"BOLT": 10, "NUT": 4, "GEAR": 0}
    requests = [("BOLT", 3), ("BOLT", 8), ("NUT", 0), ("LASER", 1), ("NUT", 4), ("GEAR", 1),
                ("BOLT", 7)]
    for r in requests:
        try:
            left = withdraw(r[0], r[1])
            print(f"{r[0]} -{r[1]} ok, left {left}")
        except InsufficientStock as e:
            print(f"{e.sku}: short, wanted {e.wanted} have {e.available}")
        except KeyError as e:
            print(f"unknown sku {str(e)}")
        except ValueError as e:
            print(f"invalid: {str(e)}")
    print(sorted(stock.items()))
