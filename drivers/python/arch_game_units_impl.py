from dataclasses import dataclass
from enum import Enum, auto


class Terrain(Enum):
    PLAIN = auto()
    FOREST = auto()
    HILL = auto()


@dataclass
class Unit:
    name: str
    base: int = 10
    hp: int = 100

    def attack_power(self, terrain: Terrain) -> int:
        return self.base


@dataclass
class Knight(Unit):
    mounted: bool = True

    def attack_power(self, terrain: Terrain) -> int:
        power = self.base
        if self.mounted:
            if terrain == Terrain.PLAIN:
                power = self.base * 2
            elif terrain == Terrain.FOREST:
                power = self.base - 3
        if self.hp < 50:
            power //= 2
        return max(power, 1)


if __name__ == "__main__":
    @dataclass
    class Archer(Unit):
        arrows: int = 5

        def attack_power(self, terrain: Terrain) -> int:
            if self.arrows == 0:
                return 1
            return self.base + (5 if terrain == Terrain.HILL else 0)

    army = [Unit(name="peasant", base=4), Archer(name="robin", base=8),
            Archer(name="empty", base=8, arrows=0),
            Knight(name="lance", base=12), Knight(name="hurt", base=12, hp=30),
            Knight(name="foot", base=9, mounted=False, hp=40), Knight(name="weak", base=3, hp=10)]
    for u in army:
        powers = [str(u.attack_power(t)) for t in [Terrain.PLAIN, Terrain.FOREST, Terrain.HILL]]
        print(f"{u.name}: {'/'.join(powers)}")
