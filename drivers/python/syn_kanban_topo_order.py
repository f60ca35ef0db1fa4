def task_order(deps: dict[str, list[str]]) -> list[str]:
    tasks = set(deps)
    for ds in deps.values():
        tasks.update(ds)
    waiting = {t: len(set(deps.get(t, []))) for t in tasks}
    users = {t: [] for t in tasks}
    for t, ds in deps.items():
        for d in set(ds):
            users[d].append(t)
    ready = sorted(t for t in tasks if waiting[t] == 0)
    order = []
    while ready:
        t = ready.pop(0)
        order.append(t)
        for u in users[t]:
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
        ready.sort()
    return order + ["CYCLE"] if len(order) < len(tasks) else order


if __name__ == "__main__":
    print(task_order({}))
    print(task_order({"deploy": ["test", "build"], "test": ["build"], "build": []}))
    print(task_order({"c": ["a"], "b": ["a"], "d": ["c", "b"], "e": []}))
    print(task_order({"x": ["y"], "y": ["z"], "z": ["x"], "w": []}))
    print(task_order({"docs": ["api", "api"]}))
