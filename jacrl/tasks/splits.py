"""Holdout / trainpool / valid, and the nested rungs of the ladder.

* Holdout: whole sources (file-disjoint), chosen greedily so that every family is held out, until it
  has at least `holdout_min` tasks. Tasks whose source is `unknown` (a foreign corpus's synthetic
  drivers name no file) share no file with anything, so they are not one giant source: the holdout
  takes their proportional share, family by family (every family found only among them is held
  out too), and the rest train. Held tasks whose gold body is a near-duplicate (difflib >=
  `decontam`) of any train body are dropped (they go nowhere).
* Trainpool: the rest, interleaved round-robin by family, so every prefix is family-balanced and the
  rungs (its prefixes: 1 ⊂ 3 ⊂ 5 ⊂ 10 ⊂ 20 ⊂ all) are nested.
* Valid: `valid_n` tasks from the pool's tail, one family at a time; never trained on, never from
  the holdout.
Deterministic: a pure function of the tasks and the knobs (source order by a seeded hash).
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
from collections import Counter
from pathlib import Path

from jacrl.project import path_or
from jacrl.ruler.drivers import UNKNOWN_SOURCE
from jacrl.tasks.record import meta, prompt_answer, read_tasks

SPLITS = ("holdout", "trainpool", "valid")
RUNGS = ("1", "3", "5", "10", "20", "all")  # the ladder's rungs: train-pool prefix sizes


@dataclasses.dataclass(frozen=True)
class SplitConfig:
    holdout_min: int = dataclasses.field(default=40, metadata={"help": "held-out tasks, at least"})
    valid_n: int = dataclasses.field(default=6, metadata={"help": "pool tail kept for validation"})
    decontam: float = dataclasses.field(
        default=0.85,
        metadata={
            "help": "drop a held task whose gold body has difflib ratio >= this with any train body"
        },
    )
    seed: int = dataclasses.field(default=0, metadata={"help": "orders sources before the greedy"})


@dataclasses.dataclass
class Splits:
    holdout: list[dict]
    trainpool: list[dict]
    valid: list[dict]
    dropped: list[str]  # ids removed by decontamination
    holdout_sources: list[str]


def _gold(t: dict) -> str:
    return "\n".join(ln.strip() for ln in meta(t)["gold"].strip().split("\n"))


def _families(tasks: list[dict]) -> set[str]:
    return {meta(t)["family"] for t in tasks}


def _pick_sources(tasks: list[dict], need: int, seed: int) -> list[str]:
    """Whole sources, greedily: most families not yet held first, then the smaller source, then a
    seeded order; until every family of `tasks` is held and at least `need` tasks are."""
    by_source: dict[str, list[dict]] = {}
    for t in tasks:
        by_source.setdefault(meta(t)["source"], []).append(t)
    families = _families(tasks)
    order = sorted(by_source, key=lambda s: _seeded(seed, s))
    chosen: list[str] = []
    covered: set[str] = set()
    held = 0
    while order and (held < need or covered != families):
        best = max(
            order,
            key=lambda s: (
                len(_families(by_source[s]) - covered),
                -len(by_source[s]),
                -order.index(s),
            ),
        )
        order.remove(best)
        chosen.append(best)
        covered |= _families(by_source[best])
        held += len(by_source[best])
    return chosen


def _pick_unsourced(tasks: list[dict], n: int, covered: set[str], seed: int) -> list[dict]:
    """n of the source-less tasks (never all of them), round-robin by family; a family the
    sourced holdout lacks gets its first task in regardless."""
    missing = _families(tasks) - covered
    n = max(min(n, len(tasks) // 2), len(missing))
    order = interleave(tasks, seed)
    first = [next(t for t in order if meta(t)["family"] == f) for f in sorted(missing)]
    return (first + [t for t in order if not any(t is f for f in first)])[:n]


def make_splits(tasks: list[dict], cfg: SplitConfig = SplitConfig()) -> Splits:
    sourced = [t for t in tasks if meta(t)["source"] != UNKNOWN_SOURCE]
    unsourced = [t for t in tasks if meta(t)["source"] == UNKNOWN_SOURCE]
    need_unsourced = cfg.holdout_min * len(unsourced) // max(len(tasks), 1)  # its share
    chosen = _pick_sources(sourced, cfg.holdout_min - need_unsourced, cfg.seed)
    holdout = [t for t in sourced if meta(t)["source"] in chosen]
    held_ids = {
        meta(t)["id"]
        for t in _pick_unsourced(unsourced, need_unsourced, _families(holdout), cfg.seed)
    }
    holdout.sort(key=lambda t: chosen.index(meta(t)["source"]))  # stable: source by source
    holdout += [t for t in unsourced if meta(t)["id"] in held_ids]
    pool = sorted(
        (t for t in sourced if meta(t)["source"] not in chosen), key=lambda t: meta(t)["source"]
    )
    pool += [t for t in unsourced if meta(t)["id"] not in held_ids]
    if held_ids:
        chosen.append(UNKNOWN_SOURCE)

    train_golds = [_gold(t) for t in pool]
    kept, dropped = [], []
    for t in holdout:
        g = _gold(t)
        sm = difflib.SequenceMatcher(None, "", g, autojunk=False)  # b = the held body (cached)
        near = False
        for other in train_golds:
            sm.set_seq1(other)
            if (
                sm.real_quick_ratio() >= cfg.decontam
                and sm.quick_ratio() >= cfg.decontam
                and sm.ratio() >= cfg.decontam
            ):
                near = True
                break
        (dropped.append(meta(t)["id"]) if near else kept.append(t))

    interleaved = interleave(pool, cfg.seed)
    # valid: the last task of each family in turn, so it spans families and no rung prefix moves
    n_valid = min(cfg.valid_n, max(0, len(interleaved) - 1))
    valid_ids: list[str] = []
    tails = {
        f: [meta(t)["id"] for t in interleaved if meta(t)["family"] == f]
        for f in sorted({meta(t)["family"] for t in interleaved})
    }
    while len(valid_ids) < n_valid:
        for fam in sorted(tails, key=lambda f: -len(tails[f])):
            if tails[fam] and len(valid_ids) < n_valid:
                valid_ids.append(tails[fam].pop())
    return Splits(
        holdout=sorted(kept, key=lambda t: meta(t)["id"]),
        trainpool=[t for t in interleaved if meta(t)["id"] not in valid_ids],
        valid=[t for t in interleaved if meta(t)["id"] in valid_ids],
        dropped=dropped,
        holdout_sources=chosen,
    )


def _seeded(seed: int, key: str) -> str:
    return hashlib.sha256(f"{seed}:{key}".encode()).hexdigest()


def interleave(tasks: list[dict], seed: int = 0) -> list[dict]:
    """Round-robin by family (families sorted; within a family a seeded shuffle of ids, so a
    prefix mixes apps rather than taking the alphabetically first one)."""
    queues: dict[str, list[dict]] = {}
    for t in sorted(tasks, key=lambda t: _seeded(seed, meta(t)["id"])):
        queues.setdefault(meta(t)["family"], []).append(t)
    out: list[dict] = []
    while any(queues.values()):
        for fam in sorted(queues):
            if queues[fam]:
                out.append(queues[fam].pop(0))
    return out


def check_rung(n: int | str, pool_size: int) -> int | str:
    """n as an int (or 'all'); a ValueError unless it is 'all' or an integer in 1..pool_size."""
    if str(n) == "all":
        return "all"
    if not str(n).strip().isdigit() or int(n) < 1:
        raise ValueError(f"rung must be a positive integer or 'all', got {n!r}")
    if int(n) > pool_size:
        raise ValueError(
            f"rung {n}: the train pool has only {pool_size} tasks; choose 1..{pool_size} or 'all'"
        )
    return int(n)


def fitting_rungs(pool_size: int, rungs=RUNGS) -> list[int | str]:
    """The rungs a pool of this size has (a small pool has no rung 20)."""
    return [r for r in rungs if r == "all" or int(r) <= pool_size]


def rung_tasks(trainpool: list[dict], n: int | str) -> list[dict]:
    """The first n pool tasks ('all' = the whole pool); n outside 1..len(pool) is an error."""
    n = check_rung(n, len(trainpool))
    return list(trainpool) if n == "all" else trainpool[:n]


def check_splits(s: Splits, rungs=RUNGS) -> list[str]:
    """Problems with a split (empty list = healthy)."""
    problems = []
    ids = {name: [meta(t)["id"] for t in getattr(s, name)] for name in SPLITS}
    for a, b in (("holdout", "trainpool"), ("holdout", "valid"), ("trainpool", "valid")):
        if set(ids[a]) & set(ids[b]):
            problems.append(f"{a} and {b} share ids: {sorted(set(ids[a]) & set(ids[b]))[:5]}")
    for name in SPLITS:
        if len(ids[name]) != len(set(ids[name])):
            problems.append(f"duplicate ids in {name}")
    src = {
        name: {meta(t)["source"] for t in getattr(s, name)} - {UNKNOWN_SOURCE} for name in SPLITS
    }  # tasks without a source share no file with anything
    if src["holdout"] & (src["trainpool"] | src["valid"]):
        problems.append(
            "holdout shares sources with training: "
            f"{sorted(src['holdout'] & (src['trainpool'] | src['valid']))}"
        )
    if not s.trainpool:
        problems.append("the train pool is empty (the holdout took every task; lower holdout_min)")
    all_fams = {meta(t)["family"] for name in SPLITS for t in getattr(s, name)}
    held_fams = {meta(t)["family"] for t in s.holdout}
    if held_fams != all_fams:
        problems.append(f"families missing from the holdout: {sorted(all_fams - held_fams)}")
    prev: list[str] = []
    for r in fitting_rungs(len(s.trainpool), rungs):
        cur = [meta(t)["id"] for t in rung_tasks(s.trainpool, r)]
        if cur[: len(prev)] != prev:
            problems.append(f"rung {r} does not extend the previous rung")
        prev = cur
    if len(s.trainpool) >= 5 and len({meta(t)["family"] for t in s.trainpool[:5]}) < 2:
        problems.append("rung 5 spans fewer than 2 families")
    return problems


def report(s: Splits) -> str:
    def fams(ts):
        return ", ".join(
            f"{k} {v}" for k, v in sorted(Counter(meta(t)["family"] for t in ts).items())
        )

    lines = [
        f"holdout   {len(s.holdout):4d}  ({fams(s.holdout)})",
        f"          sources: {', '.join(s.holdout_sources)}",
        f"trainpool {len(s.trainpool):4d}  ({fams(s.trainpool)})",
        f"valid     {len(s.valid):4d}  ({fams(s.valid)})",
        f"decontamination dropped {len(s.dropped)}: {', '.join(s.dropped) or '-'}",
    ]
    for r in fitting_rungs(len(s.trainpool)):
        lines.append(f"rung {str(r):>3}: {fams(rung_tasks(s.trainpool, r))}")
    problems = check_splits(s)
    lines.append("self-check: " + ("OK" if not problems else "; ".join(problems)))
    return "\n".join(lines)


def write_splits(s: Splits, data_dir: str | Path | None = None) -> None:
    out = path_or(data_dir, "data") / "splits"
    out.mkdir(parents=True, exist_ok=True)
    for name in SPLITS:
        tmp = out / f".{name}.jsonl.tmp"
        with open(tmp, "w") as fh:
            for t in getattr(s, name):
                fh.write(json.dumps(prompt_answer(t)) + "\n")
        tmp.replace(out / f"{name}.jsonl")


def build_splits(data_dir: str | Path | None = None, cfg: SplitConfig = SplitConfig()) -> Splits:
    data_dir = path_or(data_dir, "data")
    s = make_splits(read_tasks(data_dir / "tasks.jsonl"), cfg)
    problems = check_splits(s)
    if problems:
        raise ValueError(f"{data_dir}/splits: " + "; ".join(problems))
    write_splits(s, data_dir)
    return s


def load_split(name: str, data_dir: str | Path | None = None) -> list[dict]:
    """Records ({"prompt", "answer"}) of holdout, trainpool or valid (default: the project's)."""
    if name not in SPLITS:
        raise ValueError(f"unknown split {name!r}; choose from {SPLITS}")
    path = path_or(data_dir, "data") / "splits" / f"{name}.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no splits yet; run `jacrl split`")
    return [prompt_answer(t) for t in read_tasks(path)]


def rung(n: int | str, data_dir: str | Path | None = None) -> list[dict]:
    """The training tasks of rung n."""
    return rung_tasks(load_split("trainpool", data_dir), n)
