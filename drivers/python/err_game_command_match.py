MOVES = {"north": (0, 1), "south": (0, -1), "east": (1, 0), "west": (-1, 0)}


def apply_command(h: "Hero", line: str) -> str:
    words = line.split()
    match words:
        case []:
            raise CommandError("empty")
        case ["go", direction]:
            if direction not in MOVES:
                raise CommandError(f"bad direction: {direction}")
            dx, dy = MOVES[direction]
            h.x += dx
            h.y += dy
            return f"at {h.x},{h.y}"
        case ["take", item]:
            h.items.append(item)
            return f"took {item}"
        case ["drop", item]:
            if item not in h.items:
                raise CommandError(f"not carrying {item}")
            h.items.remove(item)
            return f"dropped {item}"
        case _:
            raise CommandError(f"unknown: {words[0]}")


if __name__ == "__main__":
    from dataclasses import dataclass, field

    class CommandError(Exception):
        pass

    @dataclass
    class Hero:
        x: int = 0
        y: int = 0
        items: list[str] = field(default_factory=list)

    h = Hero()
    for line in ["go north", "go east", "go up", "take sword", "drop shield", "", "drop sword",
                 "dance wildly", "go south", "take"]:
        try:
            print(apply_command(h, line))
        except CommandError as e:
            print(f"error: {str(e)}")
    print(f"final {h.x},{h.y} {h.items}")
