def apply_action(t: "Thread", action: tuple) -> str:
    if t.deleted:
        raise ModError(msg="thread deleted", code=410)
    match action:
        case ("lock",):
            if t.locked:
                raise ModError(msg="already locked", code=409)
            t.locked = True
            return "locked"
        case ("warn", user):
            t.warnings.append(user)
            return f"warned {user}"
        case ("rename", str() as new):
            if not new.strip():
                raise ModError(msg="empty title", code=422)
            t.title = new
            return "renamed"
        case ("delete",):
            t.deleted = True
            return "deleted"
        case _:
            raise ModError(msg="unknown action", code=400)


if __name__ == "__main__":
    from dataclasses import dataclass, field

    @dataclass
    class ModError(Exception):
        msg: str = ""
        code: int = 400

    @dataclass
    class Thread:
        title: str
        locked: bool = False
        deleted: bool = False
        warnings: list[str] = field(default_factory=list)

    t = Thread(title="Help me")
    actions = [("lock",), ("warn", "ben"), ("lock",), ("rename", "  "), ("rename", "Solved"),
               ("ban", "x"), ("rename", 42), ("delete",), ("warn", "cai")]
    for a in actions:
        try:
            print(f"{a} -> {apply_action(t, a)}")
        except ModError as e:
            print(f"{a} -> error {e.code}: {e.msg}")
    print(f"{t.title} locked={t.locked} deleted={t.deleted} warnings={t.warnings}")
