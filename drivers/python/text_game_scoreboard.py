def scoreboard(scores: dict[str, int], top: int) -> list[str]:
    if not scores:
        return ["(no scores)"]
    ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return [f"{rank:>2}. {name[:12]:.<12} {points:>6}"
            for rank, (name, points) in enumerate(ranked[:top], 1)]


if __name__ == "__main__":
    scores = {"zed": 300, "amy": 1200, "bartholomew_the_great": 300, "kai": 75, "lu": 1200}
    for line in scoreboard(scores, 4):
        print(line)
    print("--")
    for line in scoreboard({}, 3):
        print(line)
    for line in scoreboard({"solo": 5}, 0):
        print(line)
    print("end")
