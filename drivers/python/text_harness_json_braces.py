def render(fields: dict[str, int]) -> str:
    if not fields:
        return "{} #empty"
    return "{" + ", ".join(f"{k}: {fields[k]}" for k in sorted(fields)) + "}"


if __name__ == "__main__":
    print(render({"b": 2, "a": 1}))
    print(render({}))
    print(render({"z": 26}))
