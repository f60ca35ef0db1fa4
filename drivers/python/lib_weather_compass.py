def wind_label(degrees: float, kmh: float) -> str:
    if kmh < 1:
        return "calm"
    point = POINTS[int((degrees % 360 + 22.5) // 45) % 8]
    label = f"{point} {round(kmh)} km/h"
    if kmh >= 62:
        label += " gale"
    return label


if __name__ == "__main__":
    POINTS = ["N", "NE", "E", "SE", "S", "SW", "W", "NW"]
    for d, s in [(0.0, 10.0), (22.4, 5.2), (22.5, 5.5), (100.0, 30.0), (359.0, 62.0),
                 (-45.0, 12.0), (720.0, 80.4), (200.0, 0.5), (290.0, 1.0)]:
        print(f"{d} {s} -> {wind_label(d, s)}")
