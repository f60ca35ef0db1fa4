from dataclasses import dataclass, field


@dataclass
class Shape:
    label: str

    def area(self) -> float:
        return 0.0

    def summary(self) -> str:
        return f"{self.label}: area={self.area():.2f}"


@dataclass
class Polygon(Shape):
    points: list[tuple[float, float]] = field(default_factory=list)

    def area(self) -> float:
        n = len(self.points)
        if n < 3:
            return 0.0
        acc = 0.0  # the shoelace formula
        for i in range(n):
            x1, y1 = self.points[i]
            x2, y2 = self.points[(i + 1) % n]
            acc += x1 * y2 - x2 * y1
        return abs(acc) / 2.0


if __name__ == "__main__":
    import math

    @dataclass
    class Circle(Shape):
        radius: float = 1.0

        def area(self) -> float:
            return math.pi * self.radius * self.radius

    shapes = [Shape(label="blank"), Circle(label="fountain", radius=2.0),
              Polygon(label="park", points=[(0.0, 0.0), (4.0, 0.0), (4.0, 3.0), (0.0, 3.0)]),
              Polygon(label="lot", points=[(0.0, 0.0), (5.0, 0.0), (0.0, 5.0)]),
              Polygon(label="cw", points=[(0.0, 0.0), (0.0, 2.0), (3.0, 2.0), (3.0, 0.0)]),
              Polygon(label="line", points=[(0.0, 0.0), (1.0, 1.0)]),
              Polygon(label="ell",
                      points=[(0.0, 0.0), (2.0, 0.0), (2.0, 1.0), (1.0, 1.0), (1.0, 3.0),
                              (0.0, 3.0)])]
    for s in shapes:
        print(s.summary())
