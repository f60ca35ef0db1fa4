from dataclasses import dataclass, field
from enum import Enum, auto


class Dept(Enum):
    MATH = auto()
    SCIENCE = auto()
    ARTS = auto()


@dataclass
class Staff:
    name: str
    years: int = 0

    def describe(self) -> str:
        return f"{self.name} (staff, {self.years}y)"


@dataclass
class Teacher(Staff):
    dept: Dept = Dept.MATH
    classes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        listing = ", ".join(sorted(self.classes)) if self.classes else "no classes"
        text = f"{self.name} teaches {self.dept.name.lower()}: {listing}"
        if self.years >= 10:
            text += " [senior]"
        return text


if __name__ == "__main__":
    people = [Staff(name="Ola", years=4),
              Teacher(name="Pia", years=12, dept=Dept.SCIENCE, classes=["Physics", "Chemistry"]),
              Teacher(name="Quin", years=2, dept=Dept.ARTS),
              Teacher(name="Rex", years=10, classes=["Geometry", "Algebra", "Calculus"]),
              Teacher(name="Sue", years=9, dept=Dept.MATH, classes=["Statistics"])]
    for p in people:
        print(p.describe())
