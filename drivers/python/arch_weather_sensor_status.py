from dataclasses import dataclass, field
from enum import Enum, auto


class Health(Enum):
    OK = auto()
    STALE = auto()
    DRIFTING = auto()
    DEAD = auto()


@dataclass
class Sensor:
    sid: str
    last_seen_min: int = 0
    readings: list[float] = field(default_factory=list)

    def health(self) -> Health:
        if not self.readings or self.last_seen_min > 240:
            return Health.DEAD
        if self.last_seen_min > 30:
            return Health.STALE
        spread = max(self.readings) - min(self.readings)
        if isinstance(self, Barometer) and spread > self.drift_limit:
            return Health.DRIFTING
        return Health.OK

    def report_line(self) -> str:
        return f"{self.sid} {type(self).__name__} {self.health().name}"


@dataclass
class Barometer(Sensor):
    drift_limit: float = 5.0


if __name__ == "__main__":
    sensors = [Sensor(sid="t1", readings=[1.0, 50.0]),
               Sensor(sid="t2", last_seen_min=45, readings=[2.0]),
               Sensor(sid="t3", last_seen_min=10), Barometer(sid="b1", readings=[1010.0, 1013.5]),
               Barometer(sid="b2", readings=[1000.0, 1012.0]),
               Barometer(sid="b3", readings=[1000.0, 1012.0], drift_limit=20.0),
               Barometer(sid="b4", last_seen_min=300, readings=[990.0])]
    for s in sensors:
        print(s.report_line())
