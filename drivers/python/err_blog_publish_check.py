def check_publishable(d: "Draft") -> None:
    problems = []
    if len(d.title.strip()) < 5:
        problems.append("title too short")
    if len(d.body.split()) < 20:
        problems.append("body too short")
    if not d.tags:
        problems.append("no tags")
    elif len(d.tags) > 5:
        problems.append("too many tags")
    if d.cover and not d.cover.lower().endswith((".png", ".jpg")):
        problems.append("bad cover")
    if problems:
        raise PublishError(problems=problems)


if __name__ == "__main__":
    from dataclasses import dataclass, field

    @dataclass
    class PublishError(Exception):
        problems: list[str] = field(default_factory=list)

    @dataclass
    class Draft:
        title: str
        body: str
        tags: list[str] = field(default_factory=list)
        cover: str = ""

    long_body = " ".join(["word"] * 25)
    drafts = [Draft(title="A good title", body=long_body, tags=["jac"], cover="HERO.PNG"),
              Draft(title=" Hi ", body="too short", tags=[]),
              Draft(title="Tag soup", body=long_body, tags=["a", "b", "c", "d", "e", "f"],
                    cover="x.gif"),
              Draft(title="Exactly", body=" ".join(["w"] * 20), tags=["x"], cover="")]
    for d in drafts:
        try:
            check_publishable(d)
            print(f"{d.title.strip()}: ok")
        except PublishError as e:
            print(f"{d.title.strip()}: {len(e.problems)} problem(s): {'; '.join(e.problems)}")
        finally:
            print("  checked")
