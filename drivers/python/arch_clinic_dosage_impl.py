from dataclasses import dataclass
from enum import Enum, auto


class Route(Enum):
    ORAL = auto()
    IV = auto()
    TOPICAL = auto()


@dataclass
class Medication:
    name: str
    mg_per_kg: float
    route: Route = Route.ORAL
    max_daily_mg: float = 1000.0

    def daily_dose(self, weight_kg: float, doses_per_day: int) -> str:
        if self.route == Route.TOPICAL:
            return f"{self.name}: apply as directed"
        if doses_per_day < 1:
            return f"{self.name}: invalid schedule"
        total = min(self.mg_per_kg * weight_kg, self.max_daily_mg)
        each = round(total / doses_per_day, 1)
        return (f"{self.name}: {round(total, 1)} mg/day as {doses_per_day} x {each} mg "
                f"({self.route.name.lower()})")


if __name__ == "__main__":
    meds = [Medication(name="Amoxil", mg_per_kg=25.0),
            Medication(name="Vanco", mg_per_kg=15.0, route=Route.IV, max_daily_mg=2000.0),
            Medication(name="Hydro", mg_per_kg=1.0, route=Route.TOPICAL),
            Medication(name="Para", mg_per_kg=60.0, max_daily_mg=4000.0)]
    for m in meds:
        print(m.daily_dose(20.0, 3))
        print(m.daily_dose(80.0, 4))
    print(meds[0].daily_dose(10.0, 0))
