def check_in(g: "Guest", request: tuple[str, int]) -> str:
    if not g.id_ok:
        raise CheckinError(status="no id")
    if not g.paid:
        raise CheckinError(status="unpaid")
    match request:
        case ("early", hour) if hour < 12:
            return f"{g.name} early at {hour}:00 (fee 30)"
        case ("late", hour) if hour >= 23:
            raise CheckinError(status="desk closed")
        case ("early", _) | ("late", _) | ("standard", _):
            return f"{g.name} checked in"
        case (kind, _):
            raise CheckinError(status=f"unknown request {kind}")


if __name__ == "__main__":
    from dataclasses import dataclass

    @dataclass
    class CheckinError(Exception):
        status: str

    @dataclass
    class Guest:
        name: str
        paid: bool = True
        id_ok: bool = True

    ann = Guest(name="Ann")
    reqs = [("standard", 15), ("early", 9), ("early", 13), ("late", 22), ("late", 23), ("vip", 10)]
    for r in reqs:
        try:
            print(check_in(ann, r))
        except CheckinError as e:
            print(f"refused: {e.status}")
    for g in [Guest(name="Bo", paid=False), Guest(name="Cy", paid=False, id_ok=False)]:
        try:
            print(check_in(g, ("standard", 14)))
        except CheckinError as e:
            print(f"{g.name} refused: {e.status}")
        finally:
            print(f"{g.name} handled")
