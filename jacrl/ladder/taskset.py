"""Which tasks a ladder cell trains and evaluates on: the rung's tasks, the valid split, a gen
sample of the holdout stratified by family, the mem prefix, in the cell's task format (hole-fill,
or Python -> Jac conversion, `jacrl.tasks.conversion`), over every id or only the ids that have a
conversion task (paired). Reads the splits only.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence

from jacrl.tasks import splits
from jacrl.tasks.record import family_of, meta, read_conversion

FORMATS = ("hole", "conversion")  # hole-fill (an instruction) | Python -> Jac (tasks.conversion)


def stratified(tasks: Sequence[dict], n: int) -> list[dict]:
    """n of `tasks` taken round-robin by family (families sorted), each family's next pick being
    its first task (in the given order) from the source used least so far, so the sample spreads
    over sources too; returned in the given order. Deterministic; every family is present when
    n >= the number of families. n <= 0 or n >= len(tasks): all of them."""
    tasks = list(tasks)
    if n <= 0 or n >= len(tasks):
        return tasks
    sources = [str(meta(t).get("source", "")) for t in tasks]
    queues: dict[str, list[int]] = {}
    for i, t in enumerate(tasks):
        queues.setdefault(family_of(t), []).append(i)
    used: Counter = Counter()
    picked: list[int] = []
    while len(picked) < n:
        for fam in sorted(queues):
            if queues[fam] and len(picked) < n:
                i = min(queues[fam], key=lambda j: used[sources[j]])  # first of the least used
                queues[fam].remove(i)
                used[sources[i]] += 1
                picked.append(i)
    return [tasks[i] for i in sorted(picked)]


def cell_tasks(
    rung: str,
    data_dir: str | os.PathLike | None,
    gen_limit: int = 0,
    mem_limit: int = 0,
    format: str = "hole",
    paired: bool = False,
) -> dict[str, list[dict]]:
    """{"train": the rung's tasks, "valid", "gen": gen_limit holdout tasks sampled round-robin
    by family (`stratified`; 0 = the whole holdout), "mem": train[:mem_limit]}.

    Paired (and always for format "conversion"): every split keeps only the ids that have a
    conversion task (`jacrl.tasks.conversion`), so rung N is the first N of those in the train pool
    and the holdout is the hole-fill holdout's (file-disjoint) ids that have one; the ids are chosen
    on the hole-fill tasks, so a hole and a conversion cell of the same rung and limits train and
    evaluate the very same ids. Format "conversion" then swaps each task for its conversion
    record (same id and answer, the Python -> Jac prompt)."""
    pool = splits.load_split("trainpool", data_dir)
    valid = splits.load_split("valid", data_dir)
    hold = splits.load_split("holdout", data_dir)
    conv: dict[str, dict] = {}
    if paired or format != "hole":
        conv = {meta(t)["id"]: t for t in read_conversion(data_dir)}
        pool, valid, hold = ([t for t in ts if meta(t)["id"] in conv] for ts in (pool, valid, hold))
    train = splits.rung_tasks(pool, rung)
    out = {
        "train": train,
        "valid": valid,
        "gen": stratified(hold, gen_limit),
        "mem": train[:mem_limit] if mem_limit else train,
    }
    if format == "conversion":
        out = {name: [conv[meta(t)["id"]] for t in ts] for name, ts in out.items()}
    return out


def pool_size(data_dir: str | os.PathLike | None, paired: bool = False) -> int:
    """Tasks in the train pool (paired: those with a conversion task), the size of rung 'all'."""
    return len(cell_tasks("all", data_dir, paired=paired)["train"])


def task_format(format: str, paired: bool | str = False) -> tuple[str, bool]:
    """(format, paired) checked: papermill may pass paired as a string; conversion is paired."""
    if format not in FORMATS:
        raise ValueError(f"unknown task format {format!r}; choose from {', '.join(FORMATS)}")
    if isinstance(paired, str):
        paired = paired.strip().lower() in ("1", "true", "yes")
    return format, bool(paired) or format != "hole"


PROMPT_POOLS = ("rung", "pool", "beyond")  # or N: the first N tasks of the train pool


def check_prompts(prompts: str) -> str:
    """A `grpo_prompts` value checked: one of PROMPT_POOLS or a positive number of tasks."""
    p = str(prompts).strip()
    if p in PROMPT_POOLS or (p.isdigit() and int(p) > 0):
        return p
    raise ValueError(
        f"grpo_prompts {prompts!r}: expected {', '.join(PROMPT_POOLS)} or a number of tasks >= 1"
    )


def grpo_tasks(
    prompts: str,
    rung: str,
    data_dir: str | os.PathLike | None,
    format: str = "hole",
    paired: bool = False,
) -> list[dict]:
    """The tasks GRPO's prompts are drawn from (`check_prompts`): the rung's own, the whole train
    pool, the pool beyond the rung (tasks SFT never trained on), or the pool's first N. Never
    the holdout or valid split. An empty choice (beyond at rung 'all') or N larger than the pool
    is a one-line error."""
    p = check_prompts(prompts)
    pool = cell_tasks("all", data_dir, format=format, paired=paired)["train"]
    rung_ids = {meta(t)["id"] for t in splits.rung_tasks(pool, rung)}
    if p == "rung":
        return [t for t in pool if meta(t)["id"] in rung_ids]
    if p == "pool":
        return pool
    if p == "beyond":
        out = [t for t in pool if meta(t)["id"] not in rung_ids]
        if not out:
            raise ValueError(f"grpo_prompts beyond at rung {rung}: the rung is the whole pool")
        return out
    if int(p) > len(pool):
        raise ValueError(f"grpo_prompts {p}: the train pool has {len(pool)} tasks")
    return pool[: int(p)]
