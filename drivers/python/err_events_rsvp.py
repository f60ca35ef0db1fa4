def rsvp(g: "Gathering", cmd: dict[str, str]) -> str:
    match cmd:
        case {"action": "yes", "name": n}:
            if n in g.going or n in g.waitlist:
                raise RsvpError(code="dup")
            if len(g.going) < g.capacity:
                g.going.append(n)
                return f"{n} going"
            g.waitlist.append(n)
            return f"{n} waitlisted #{len(g.waitlist)}"
        case {"action": "no", "name": n}:
            if n in g.waitlist:
                g.waitlist.remove(n)
                return f"{n} left waitlist"
            if n not in g.going:
                raise RsvpError(code="unknown")
            g.going.remove(n)
            if not g.waitlist:
                return f"{n} left"
            promoted = g.waitlist.pop(0)
            g.going.append(promoted)
            return f"{n} left, {promoted} promoted"
        case _:
            raise RsvpError(code="bad")


if __name__ == "__main__":
    from dataclasses import dataclass, field

    @dataclass
    class RsvpError(Exception):
        code: str = "bad"

    @dataclass
    class Gathering:
        capacity: int
        going: list[str] = field(default_factory=list)
        waitlist: list[str] = field(default_factory=list)

    g = Gathering(capacity=2)
    cmds = [{"action": "yes", "name": "ana"}, {"action": "yes", "name": "ben"},
            {"action": "yes", "name": "cai"}, {"action": "yes", "name": "dev"},
            {"action": "yes", "name": "ben"}, {"action": "no", "name": "dev"},
            {"action": "no", "name": "ana"}, {"action": "no", "name": "zed"},
            {"action": "maybe", "name": "eli"}, {"name": "fay"}, {"action": "no", "name": "ben"}]
    for c in cmds:
        try:
            print(rsvp(g, c))
        except RsvpError as e:
            print(f"error[{e.code}] for {c}")
    print(f"going={g.going} waitlist={g.waitlist}")
