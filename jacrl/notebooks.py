"""What the notebooks (notebooks/*.ipynb) call besides the pipeline modules, so that they hold no
logic and the tests reach it: the quick switch, notebook 10's task build and split writing,
notebook 20's task pick, notebook 40's rows, and the SUMMARY line every notebook ends with.
(Notebook 30's view of a GRPO run, per step, is `jacrl.report.grpo`.)

Paths: a notebook parameter naming a path defaults to "" = the project's (`jacrl.project`), so a
kernel started anywhere inside the project finds drivers/, data/, models/, results/, artifacts/
and figures/ (JupyterLab starts it in notebooks/; papermill wherever it is told). A path given
is taken relative to the kernel's working directory, as on a command line.

Quick: with JACRL_NOTEBOOK_QUICK=1 the defaults that take long on a CPU are scaled down (the
`QUICK` caps: notebook 00 mines a few files, notebook 30 trains a few iterations and evaluates a
few tasks with short completions), and the notebook says what it changed. Everything else runs
at its default. A ladder cell (notebook 30 given its planned `cell_key`) is never scaled.
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from itertools import pairwise
from pathlib import Path

from jacrl.project import path_or, project, rows_path
from jacrl.tasks import build, splits

QUICK_ENV = "JACRL_NOTEBOOK_QUICK"
INJECTED = "# Parameters\n"  # how the cell papermill injects after the `parameters` cell begins


def unknown_params(unknown, known, what: str = "parameter") -> str:
    """The one-line error for parameters a notebook does not know (with the closest known name)."""
    names = []
    for name in sorted(unknown):
        close = difflib.get_close_matches(name, sorted(known), n=1)
        names.append(repr(name) + (f" (did you mean {close[0]!r}?)" if close else ""))
    return f"unknown {what} {', '.join(names)}; known: {', '.join(sorted(known))}"


def _assigned(source: str) -> set[str]:
    """The names a cell binds at its top level (`name = value`)."""
    return {
        t.id
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }


def check_parameters(namespace: Mapping) -> None:
    """Papermill's parameters against the notebook's own (pass `globals()`): every name papermill
    injected must be one the `parameters` cell binds, else a one-line TypeError naming the
    closest, before anything runs. Papermill runs the parameters cell and then its injected cell
    (which starts with INJECTED), so both are in the kernel's input history (`In`); by hand (no
    injected cell) there is nothing to check. Notebook 30 checks its own, wider set (any
    LadderConfig field: `jacrl.ladder.notebook_cell`)."""
    history = list(namespace.get("In") or [])
    for before, source in pairwise(history):
        if source.startswith(INJECTED):
            known, given = _assigned(before), _assigned(source)
            if given - known:
                raise TypeError(unknown_params(given - known, known))
            return


# notebook -> parameter -> its largest value in quick mode
QUICK: dict[str, dict] = {
    "00_corpus_mining": {"max_files": 6, "timeout": 5.0},
    "30_training": {
        "sft_iters": 3,
        "grpo_iters": 2,
        "gen_limit": 2,
        "mem_limit": 2,
        "n": 2,
        "max_tokens": 16,
    },
}
ZERO_MEANS_ALL = {"gen_limit", "mem_limit"}  # 0 = every task, above any cap
# quick training settings {stage: knobs} under the notebook's own sets (which win): jac-tiny-sized,
# no warm-up, no validation pass beyond one batch
QUICK_SETS = {
    "sft": {
        "warmup": 0,
        "lora_layers": 2,
        "lora_rank": 4,
        "grad_checkpoint": False,
        "batch_size": 1,
        "steps_per_report": 1,
        "steps_per_eval": 1000,
        "val_batches": 1,
    },
    "grpo": {
        "group_size": 2,
        "max_completion_length": 16,
        "lora_layers": 2,
        "lora_rank": 4,
        "grad_checkpoint": False,
        "steps_per_report": 1,
    },
}


def quick(env: Mapping[str, str] = os.environ) -> bool:
    return env.get(QUICK_ENV, "") not in ("", "0")


def scaled(
    notebook: str,
    params: Mapping,
    env: Mapping[str, str] = os.environ,
    log: Callable[[str], None] = print,
) -> dict:
    """`params` as given, or under JACRL_NOTEBOOK_QUICK=1 with the notebook's QUICK caps applied
    (and, for a cell, k limited to n and the quick training settings under its own `sets`).
    Logs each change."""
    out = dict(params)
    if not quick(env):
        return out
    changed = []
    for name, cap in QUICK.get(notebook, {}).items():
        v = out.get(name)
        if v is not None and (v > cap or (v == 0 and name in ZERO_MEANS_ALL)):
            out[name] = cap
            changed.append(f"{name} {v} -> {cap}")
    if "k" in out and "n" in out:  # pass@k needs k <= n
        ks = [x.strip() for x in str(out["k"]).split(",") if x.strip()]
        kept = ",".join(x for x in ks if int(x) <= int(out["n"])) or "1"
        if kept != ",".join(ks):
            changed.append(f"k {out['k']} -> {kept}")
            out["k"] = kept
    if notebook == "30_training":
        given = out.get("sets") or {}
        given = json.loads(given) if isinstance(given, str) else dict(given)
        out["sets"] = json.dumps(
            {**given, **{s: {**small, **given.get(s, {})} for s, small in QUICK_SETS.items()}}
        )
        changed.append(f"sets -> {out['sets']}")
    if changed:
        log(f"{QUICK_ENV}=1: " + "; ".join(changed))
    return out


def summary(**fields) -> dict:
    """Print the notebook's last line, `SUMMARY {json}` (what the tests read), with the project
    root it ran in; returns the dict."""
    out = {"project": str(project().root), **fields}
    print("SUMMARY " + json.dumps(out, default=str))
    return out


# -------------------------------------------------------------------------------------------
# 10 · task building
# -------------------------------------------------------------------------------------------


def select_drivers(
    drivers_dir: str | os.PathLike, globs: str, dest: str | os.PathLike
) -> list[Path]:
    """Copy the drivers matching any of the comma-separated `globs` into `dest`; an error when
    none match."""
    src, dest = Path(drivers_dir), Path(dest)
    picked = sorted(
        {p for pat in globs.split(",") if pat.strip() for p in src.glob(pat.strip()) if p.is_file()}
    )
    if not picked:
        raise FileNotFoundError(f"{src}: no drivers match {globs!r}")
    dest.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copy(p, dest)) for p in picked]


def ensure_tasks(
    drivers_dir: str = "",
    globs: str = "*.jac",
    data_dir: str = "",
    rebuild: bool = False,
    log: Callable[[str], None] = print,
) -> Path:
    """tasks.jsonl in `data_dir` (default: the project's data/), built from the drivers matching
    `globs` when it is missing or `rebuild`; returns its path. A failed build raises with every
    `drivers/x.jac:LINE: reason` and writes nothing."""
    data, drivers = path_or(data_dir, "data").resolve(), path_or(drivers_dir, "drivers").resolve()
    out = data / "tasks.jsonl"
    if out.is_file() and not rebuild:
        log(f"using {out} (rebuild=True rebuilds it from {drivers})")
        return out
    with tempfile.TemporaryDirectory(prefix="jacrl-drivers-") as tmp:
        src = drivers
        if globs.strip() != "*.jac":  # a subset: build from a copy of the matching drivers
            select_drivers(drivers, globs, tmp)
            src = Path(tmp)
        rep = build.build_tasks(src, data)
    if rep.failures:
        raise RuntimeError("task build failed; fix the drivers:\n" + "\n".join(rep.failures))
    log(f"built {len(rep.built)} tasks from {drivers} ({globs}) into {out} in {rep.seconds:.0f} s")
    return out


def rung_families(trainpool: list[dict]):
    """Tasks per family (rows) in each rung (columns) the pool is large enough for; the rungs
    are nested prefixes of the interleaved pool."""
    import pandas as pd

    fams = {
        str(r): pd.Series(
            [t["meta"]["family"] for t in splits.rung_tasks(trainpool, r)]
        ).value_counts()
        for r in splits.fitting_rungs(len(trainpool))
    }
    return pd.DataFrame(fams).fillna(0).astype(int)


def save_splits(
    s,
    problems: list[str],
    data_dir: str = "",
    force: bool = False,
    log: Callable[[str], None] = print,
) -> Path | None:
    """Write the splits to `data_dir`/splits/ when they are missing or `force`, never when they
    have problems; returns the folder written, else None."""
    out = path_or(data_dir, "data").resolve() / "splits"
    missing = not all((out / f"{n}.jsonl").is_file() for n in splits.SPLITS)
    if problems or not (force or missing):
        log(
            f"{out}: not written"
            + (
                f" ({'; '.join(problems)})"
                if problems
                else " (exists; write_splits=True overwrites it)"
            )
        )
        return None
    splits.write_splits(s, out.parent)
    log(f"wrote {out}/")
    return out


# -------------------------------------------------------------------------------------------
# 20 · reward inspection
# -------------------------------------------------------------------------------------------


def pick_task(
    split: str = "holdout", task_id: str = "", data_dir: str = ""
) -> tuple[dict, dict, str]:
    """(task record, its answer JSON, another task's gold body) from a split: `task_id`, else the
    split's first task."""
    pool = splits.load_split(split, data_dir or None)
    metas = [json.loads(t["answer"]) for t in pool]
    ids = [m["id"] for m in metas]
    if task_id and task_id not in ids:
        raise KeyError(f"no task {task_id!r} in the {split} split ({len(ids)} tasks)")
    i = ids.index(task_id) if task_id else 0
    other = next((m["gold"] for m in metas if m["id"] != ids[i]), None)
    if other is None:
        raise ValueError(f"the {split} split needs a second task to compare with")
    return pool[i], metas[i], other


# -------------------------------------------------------------------------------------------
# 40 · ladder analysis
# -------------------------------------------------------------------------------------------


def ladder_rows(
    results: str = "", include_stale: bool = False, log: Callable[[str], None] = print
) -> tuple[list[dict], Path, dict]:
    """The ladder's rows (default: the project's results/rl_ladder.jsonl), their file and its
    provenance stamp (`report.source_stamp`, taken before the rows are read: what the figures
    drawn from them record); an error when there are none, so the analysis never draws empty
    figures. Stale rows (model, adapter or tasks changed on disk since; `report.stale_reasons`)
    are left out, as `jacrl ladder show` does, unless include_stale."""
    from jacrl import report

    path = rows_path(results).resolve()
    source = report.source_stamp(path) if path.is_file() else None
    rows = report.load_rows(path)
    if not rows:
        raise FileNotFoundError(
            f"{path}: no ladder rows; run `jacrl ladder run` (or notebook "
            "30) first, or point `results` at a results file"
        )
    if not include_stale:
        marked = report.mark_stale(rows)
        rows = [r for r, m in zip(rows, marked, strict=True) if not m["stale"]]
        if len(rows) < len(marked):
            log(f"left out {len(marked) - len(rows)} stale row(s) (include_stale=True shows them)")
        if not rows:
            raise ValueError(f"{path}: every row is stale (its model, adapter or tasks changed)")
    return rows, path, source
