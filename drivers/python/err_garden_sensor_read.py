def read_with_retry(s: "Sensor", attempts: int) -> str:
    last = ""
    for k in range(1, attempts + 1):
        s.open_count += 1
        try:
            return f"{s.name}={s.read()} (try {k})"
        except SensorError as e:
            last = str(e)
        except IndexError:
            return f"{s.name}: no data"
        finally:
            s.open_count -= 1
    return f"{s.name}: failed after {attempts} tries: {last}"


if __name__ == "__main__":
    from dataclasses import dataclass

    class SensorError(Exception):
        pass

    @dataclass
    class Sensor:
        name: str
        readings: list[int]
        pos: int = 0
        open_count: int = 0

        def read(self) -> int:
            value = self.readings[self.pos]
            self.pos += 1
            if value < 0:
                raise SensorError(f"{self.name} glitch {value}")
            return value

    sensors = [(Sensor(name="bedA", readings=[41]), 3),
               (Sensor(name="bedB", readings=[-1, -2, 37]), 3),
               (Sensor(name="bedC", readings=[-1, -9, -4, 50]), 3),
               (Sensor(name="bedD", readings=[-3]), 4),
               (Sensor(name="bedE", readings=[]), 2)]
    for s, n in sensors:
        print(f"{read_with_retry(s, n)} open={s.open_count} pos={s.pos}")
