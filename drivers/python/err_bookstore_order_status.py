def next_state(state: str, event: tuple) -> str:
    match (state, event):
        case ("new", ("pay", amount)) if amount > 0:
            return "paid"
        case ("paid", ("ship", carrier)):
            return f"shipped:{carrier}"
        case (s, ("deliver",)) if s.startswith("shipped"):
            return "delivered"
        case ("new" | "paid", ("cancel",)):
            return "cancelled"
        case _:
            name = event[0] if event else "?"
            raise TransitionError(detail=f"{state}+{name}")


if __name__ == "__main__":
    from dataclasses import dataclass

    @dataclass
    class TransitionError(Exception):
        detail: str = ""

    flows = [[("pay", 20), ("ship", "ups"), ("deliver",)], [("pay", 0)], [("cancel",), ("pay", 5)],
             [("pay", 9), ("cancel",)], [("ship", "dhl")], [()]]
    for steps in flows:
        state = "new"
        trail = [state]
        try:
            for ev in steps:
                state = next_state(state, ev)
                trail.append(state)
            print(" -> ".join(trail))
        except TransitionError as e:
            print(" -> ".join(trail) + " !! " + e.detail)
