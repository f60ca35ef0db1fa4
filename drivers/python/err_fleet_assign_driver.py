def assign(d: "Driver", weight_t: int, shift_h: int) -> str:
    need = required_class(weight_t)
    match need:
        case "B":
            ok = d.license in ["B", "C", "CE"]
        case "C":
            ok = d.license in ["C", "CE"]
        case _:
            ok = d.license == "CE"
    if not ok:
        raise AssignError(code=1, msg=f"needs {need}")
    if shift_h <= 0:
        raise AssignError(code=2, msg="bad shift")
    if d.hours_today + shift_h > 9:
        raise AssignError(code=3, msg=f"over by {d.hours_today + shift_h - 9} h")
    d.hours_today += shift_h
    return f"{d.name} ok ({d.hours_today} h)"


if __name__ == "__main__":
    from dataclasses import dataclass

    @dataclass
    class AssignError(Exception):
        code: int
        msg: str

    @dataclass
    class Driver:
        name: str
        license: str
        hours_today: int = 0

    def required_class(weight_t: int) -> str:
        if weight_t <= 3:
            return "B"
        return "C" if weight_t <= 12 else "CE"

    ana = Driver(name="Ana", license="C")
    bo = Driver(name="Bo", license="B", hours_today=6)
    cy = Driver(name="Cy", license="CE")
    jobs = [(ana, 10, 4), (ana, 2, 4), (ana, 20, 1), (bo, 3, 3), (bo, 1, 1), (bo, 5, 1),
            (cy, 40, 0),
            (cy, 40, 9), (ana, 8, 2)]
    for d, w, h in jobs:
        try:
            print(assign(d, w, h))
        except AssignError as e:
            print(f"{d.name} refused [{e.code}]: {e.msg}")
