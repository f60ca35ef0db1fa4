def to_geojson(p: "Poi") -> str:
    props = [("name", p.name)] + sorted(p.tags.items())
    properties = ", ".join(f'"{k}": "{v.replace(chr(34), chr(39))}"' for k, v in props)
    geometry = f'{{"type": "Point", "coordinates": [{p.lon:.4f}, {p.lat:.4f}]}}'
    return f'{{"type": "Feature", "geometry": {geometry}, "properties": {{{properties}}}}}'


if __name__ == "__main__":
    from dataclasses import dataclass, field

    @dataclass
    class Poi:
        name: str
        lat: float
        lon: float
        tags: dict[str, str] = field(default_factory=dict)

    pois = [Poi(name="Tower", lat=48.85837, lon=2.294481,
                tags={"kind": "landmark", "access": "paid"}),
            Poi(name='Joe\'s "Diner"', lat=-33.8688, lon=151.2093),
            Poi(name="Origin", lat=0.0, lon=0.0, tags={"z": "last", "a": "first"})]
    for p in pois:
        print(to_geojson(p))
