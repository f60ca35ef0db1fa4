def to_json(b: "Booking") -> str:
    extras = []
    for x in b.extras:
        x = x.strip()
        if x and x not in extras:
            extras.append(x)
    arr = "[" + ",".join(f'"{esc(x)}"' for x in extras) + "]"
    return (f'{{"ref":"{b.ref.upper()}","guest":"{esc(b.guest.strip())}",'
            f'"nights":{b.nights},"extras":{arr}}}')


if __name__ == "__main__":
    from dataclasses import dataclass, field

    @dataclass
    class Booking:
        ref: str
        guest: str
        nights: int
        extras: list[str] = field(default_factory=list)

    def esc(s: str) -> str:
        return s.replace("\\", "\\\\").replace('"', '\\"')

    bookings = [
        Booking(ref="bk-1", guest=" Ada Lovelace ", nights=2,
                extras=["breakfast", " parking", "breakfast"]),
        Booking(ref="bk-2", guest='Bob "Bobby" Tables', nights=1),
        Booking(ref="Bk-3", guest="C:\\path", nights=0, extras=["", "  ", "late {checkout}"]),
    ]
    for b in bookings:
        print(to_json(b))
