def send(b: "Bucket", now: int, text: str) -> str:
    match text:
        case "":
            return "error: empty"
        case str() as t if t.startswith("/"):
            return "command"
        case _:
            try:
                b.take(now)
                return f"sent@{now}"
            except RateLimited as e:
                return f"slow down: retry in {e.wait}s"


if __name__ == "__main__":
    from dataclasses import dataclass

    @dataclass
    class RateLimited(Exception):
        wait: int = 0

    @dataclass
    class Bucket:
        capacity: int
        tokens: int
        refill_every: int
        last: int = 0

        def take(self, now: int) -> None:
            gained = (now - self.last) // self.refill_every
            if gained > 0:
                self.tokens = min(self.capacity, self.tokens + gained)
                self.last += gained * self.refill_every
            if self.tokens == 0:
                raise RateLimited(wait=self.refill_every - (now - self.last))
            self.tokens -= 1

    b = Bucket(capacity=2, tokens=2, refill_every=5)
    events = [(0, "hi"), (1, "there"), (2, "again"), (3, ""), (4, "/help"), (5, "back"),
              (6, "more"),
              (12, "later"), (12, "burst"), (13, "x")]
    for t, msg in events:
        print(f"t={t} [{msg}] -> {send(b, t, msg)} tokens={b.tokens}")
