"""The learnable family: a generated sanity task set on which a tiny model can visibly learn
(issue 24). It is NOT a benchmark of Jac ability.

`generate(seed)` writes a few hundred small deterministic Jac drivers (the ordinary HOLE format,
`drivers/README.md`) from eight *shapes*: arithmetic over a function's parameters (`lib`) or over
an obj's field and a method parameter (`arch`), an f-string (`text`), a list filter and a filtered
fold (`syn`), a walker that adds a node's field along edges when a guard holds and a node ability
that feeds its visitor (`osp`), and a conversion or lookup with a fallback (`err`). The copy design
(`jacrl.tasks.learnable_shapes`): each instruction states its body's varying part literally, so a
body is a fixed skeleton plus spans copied from the prompt, names being single jac-tiny tokens.
Train and holdout programs draw their names and body constants from disjoint pools, and a few
(shape, combination) pairs — an operator pair, a fold with a comparator, a walker's update with a
guard — appear only in the holdout, so the holdout needs the same skeletons on new names, numbers
and combinations. A holdout program whose body is within `MARGIN` of any train body (difflib, as
`jacrl.tasks.splits` decontaminates) is drawn again, so the ordinary split drops none.

Sources make the ordinary split hold out exactly the generated holdout: each holdout source holds
one program of every shape (so it covers every family) and is smaller than any train source (one
shape each), which is what `jacrl.tasks.splits`' greedy picks first. `build` writes the drivers and
`manifest.jsonl` (id, shape, combination, split, new_combination), runs the ordinary build
(`jacrl.tasks.build.build_tasks`: round trip, gold 1.0, empty body fails) and split into its own
data folder, and checks that the holdout is the generated one. Same seed, same bytes.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import random
from pathlib import Path

from jacrl.tasks.learnable_shapes import COMBOS, DOC, FAMILY, HOLD_ONLY, MAKERS, SHAPES, Draw
from jacrl.tasks.splits import SplitConfig

SEED = 0
TRAIN_PER_SHAPE = {
    "arith": 40,
    "method": 40,
    "text": 40,
    "filter": 40,
    "fold": 40,
    "err": 40,
    "walk": 60,
    "node": 60,
}  # osp weighted up: 30 % of the drivers, as ours
HOLDOUT_PER_SHAPE = 8
TRAIN_CHUNK = 10  # train programs per source (one shape each); holdout sources hold one per shape
MARGIN = 0.84  # a holdout body must stay below this similarity to every train body (< decontam)


@dataclasses.dataclass(frozen=True)
class Program:
    id: str
    shape: str
    family: str
    combo: str  # the combination of slots the body uses, e.g. "*,+" or "count,<="
    split: str  # train | holdout
    new_combo: bool  # a combination no train program of this shape uses
    source: str
    text: str  # the whole driver
    body: str  # the gold body, unindented lines


# -------------------------------------------------------------------------------------------
# assembly
# -------------------------------------------------------------------------------------------


def driver_text(pid: str, shape: str, source: str, parts) -> tuple[str, str]:
    """(the driver, its gold body) from a shape's parts; the hole is the unit's whole body."""
    head, unit, calls, instr, body = parts
    at = unit.index("{HOLE}")
    indent = " " * (len(unit[at - 1]) - len(unit[at - 1].lstrip()) + 4)
    hole = [
        f'{indent}# >>>HOLE id="{pid}" instruction="{instr}"',
        *[indent + ln for ln in body],
        f"{indent}# <<<HOLE",
    ]
    lines = [
        f"# Source: {source}",
        f'"""Learnable sanity family: {DOC[shape]}."""',
        "",
        *head,
        *unit[:at],
        *hole,
        *unit[at + 1 :],
        "",
        "with entry {",
        *calls,
        "}",
    ]
    return "\n".join(lines) + "\n", "\n".join(body)


def _norm(body: str) -> str:
    """A body as `jacrl.tasks.splits` compares them: each line stripped."""
    return "\n".join(ln.strip() for ln in body.strip().split("\n"))


def similarity(a: str, b: str) -> float:
    """difflib's ratio of two bodies, lines stripped (what decontamination measures)."""
    return difflib.SequenceMatcher(None, _norm(a), _norm(b), autojunk=False).ratio()


def _near(body: str, others: list[str], limit: float) -> bool:
    sm = difflib.SequenceMatcher(None, "", _norm(body), autojunk=False)
    for o in others:
        sm.set_seq1(o)
        if sm.real_quick_ratio() >= limit and sm.quick_ratio() >= limit and sm.ratio() >= limit:
            return True
    return False


def generate(
    seed: int = SEED,
    train_per_shape: dict[str, int] | None = None,
    holdout_per_shape: int = HOLDOUT_PER_SHAPE,
) -> list[Program]:
    """The family's programs, train first then holdout; a pure function of its arguments.
    Train combinations cycle through the shape's non-held-out ones; holdout programs alternate a
    held-out combination (where the shape has one) with a train one, on holdout pools."""
    counts = {**TRAIN_PER_SHAPE, **(train_per_shape or {})}
    if set(counts) != set(SHAPES):
        raise ValueError(f"train_per_shape: unknown shape(s) {sorted(set(counts) - set(SHAPES))}")
    rng = random.Random(seed)
    out: list[Program] = []
    bodies: set[str] = set()
    n_src = 0
    for shape in SHAPES:
        seen = [c for c in COMBOS[shape] if c not in HOLD_ONLY[shape]]
        for i in range(counts[shape]):
            if i % TRAIN_CHUNK == 0:
                n_src += 1
            pid = f"{FAMILY[shape]}_{shape}_{i:03d}"
            for _ in range(50):  # a body another train program already has is drawn again
                combo = seen[(i + rng.randrange(len(seen))) % len(seen)]
                src = f"apps/learnable_{n_src:02d}"
                text, body = driver_text(pid, shape, src, MAKERS[shape](Draw(rng, 0), combo))
                if body not in bodies:
                    break
            bodies.add(body)
            out.append(Program(pid, shape, FAMILY[shape], combo, "train", False, src, text, body))
    train_bodies = [_norm(p.body) for p in out]
    for j in range(holdout_per_shape):
        src = f"apps/learnable_{n_src + 1 + j:02d}"
        for shape in SHAPES:
            held = sorted(HOLD_ONLY[shape])
            pool = (
                held
                if held and j % 2 == 0
                else [c for c in COMBOS[shape] if c not in HOLD_ONLY[shape]]
            )
            pid = f"{FAMILY[shape]}_{shape}_h{j:02d}"
            for _ in range(500):
                combo = rng.choice(pool)
                text, body = driver_text(pid, shape, src, MAKERS[shape](Draw(rng, 1), combo))
                if not _near(body, train_bodies, MARGIN):
                    break
            else:
                raise ValueError(f"{pid}: no holdout body below {MARGIN} similarity to training")
            out.append(
                Program(pid, shape, FAMILY[shape], combo, "holdout", combo in held, src, text, body)
            )
    return out


def manifest_rows(programs: list[Program]) -> list[dict]:
    return [
        {
            "id": p.id,
            "shape": p.shape,
            "family": p.family,
            "combo": p.combo,
            "split": p.split,
            "new_combo": p.new_combo,
            "source": p.source,
        }
        for p in programs
    ]


def write_drivers(programs: list[Program], folder: str | Path) -> Path:
    """`<folder>/drivers/<id>.jac` for every program (stale .jac files removed) and
    `<folder>/manifest.jsonl`; returns the drivers folder."""
    drivers = Path(folder) / "drivers"
    drivers.mkdir(parents=True, exist_ok=True)
    keep = {f"{p.id}.jac" for p in programs}
    for old in drivers.glob("*.jac"):
        if old.name not in keep:
            old.unlink()
    for p in programs:
        (drivers / f"{p.id}.jac").write_text(p.text)
    with open(Path(folder) / "manifest.jsonl", "w") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in manifest_rows(programs))
    return drivers


def split_config(programs: list[Program]) -> SplitConfig:
    """The ordinary split's knobs that hold out exactly the generated holdout."""
    return SplitConfig(holdout_min=sum(p.split == "holdout" for p in programs))


def build(
    folder: str | Path | None = None,
    seed: int = SEED,
    *,
    progress: bool = False,
    programs: list[Program] | None = None,
) -> dict:
    """Generate, write, build (ordinary build, policy warnings only) and split the family in
    `folder` (default: the project's learnable/): drivers/, manifest.jsonl, data/ with
    tasks.jsonl, templates/ and splits/. Raises ValueError, naming the driver and line, when any
    driver fails the build; ValueError when the split's holdout is not the generated one.
    Returns {"tasks", "holdout", "trainpool", "valid", "seconds", "warnings"}."""
    from jacrl.project import project
    from jacrl.tasks.build import build_tasks
    from jacrl.tasks.record import meta
    from jacrl.tasks.splits import build_splits

    folder = Path(folder) if folder is not None else project().learnable
    programs = programs if programs is not None else generate(seed)
    drivers = write_drivers(programs, folder)
    rep = build_tasks(drivers, folder / "data", progress=progress, policy="warn")
    if rep.failures:
        raise ValueError(
            f"{len(rep.failures)} learnable driver(s) failed the build; first: {rep.failures[0]}"
        )
    s = build_splits(folder / "data", split_config(programs))
    want = {p.id for p in programs if p.split == "holdout"}
    got = {meta(t)["id"] for t in s.holdout}
    if got != want or s.dropped:
        raise ValueError(
            f"{folder}/data/splits: the holdout is not the generated one "
            f"({len(got ^ want)} ids differ, {len(s.dropped)} dropped)"
        )
    return {
        "tasks": len(rep.built),
        "holdout": len(s.holdout),
        "trainpool": len(s.trainpool),
        "valid": len(s.valid),
        "seconds": round(rep.seconds, 1),
        "warnings": rep.warnings,
    }


def check_drivers(folder: str | Path, seed: int = SEED) -> list[str]:
    """`path:1: reason` for each driver (and the manifest) in `folder` that is not what `seed`
    generates: missing, different or extra. Empty: they match byte for byte."""
    folder = Path(folder)
    programs = generate(seed)
    want = {f"{p.id}.jac": p.text for p in programs}
    out = []
    for name, text in want.items():
        path = folder / "drivers" / name
        if not path.is_file():
            out.append(f"{path}:1: missing (seed {seed} generates it)")
        elif path.read_text() != text:
            line = next(
                (
                    i
                    for i, (a, b) in enumerate(
                        zip(path.read_text().split("\n"), text.split("\n"), strict=False), 1
                    )
                    if a != b
                ),
                1,
            )
            out.append(f"{path}:{line}: differs from what seed {seed} generates")
    out += [
        f"{p}:1: not generated by seed {seed}"
        for p in sorted((folder / "drivers").glob("*.jac"))
        if p.name not in want
    ]
    manifest = "".join(json.dumps(r) + "\n" for r in manifest_rows(programs))
    mpath = folder / "manifest.jsonl"
    if not mpath.is_file() or mpath.read_text() != manifest:
        out.append(f"{mpath}:1: not the manifest seed {seed} generates")
    return out
