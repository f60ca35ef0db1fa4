"""Result rows: an append-only JSONL file, one row per line.

`append_row` adds a row with one `write` + `fsync` under a lock on the file (a torn last line
left by a crash is dropped first, with a warning); `read_rows` reads a file, skips a torn last line
with a warning (the one damage a crash leaves) and raises `RowsError` (one line naming file and
line) for any other unreadable line; `format_row` is a short human summary of one evaluation row
(the fields are described in `jacrl.evaluate`).

A ladder cell files two rows (`KINDS`) under its key; `append_cell_rows` appends those not in the
file yet, under a lock, so a file never holds two rows of one (cell key, kind).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

from jacrl import jsonl
from jacrl.models.registry import read_registry

KINDS = ("gen", "mem")  # a ladder cell's rows: the holdout sample, the rung's own tasks


def model_label(model: str) -> str:
    """How rows, tags and cell names call a model: its registry name, or its directory's name;
    characters outside [A-Za-z0-9_.-] become '-' (safe in tags and file names)."""
    model = str(model)
    name = model if model in read_registry() and not Path(model).is_dir() else Path(model).name
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name) or "model"


class RowsError(ValueError):
    """A results file line that is not a JSON row and is not a torn last line."""


def append_row(path: str | os.PathLike, row: dict) -> None:
    """Append one row as one line (`jsonl.append`: one write + fsync under an exclusive lock; a
    torn last line left by a crash dropped first with a warning at the line that called into
    this module)."""
    jsonl.append(path, row, through=(__file__,))


def read_rows(path: str | os.PathLike) -> list[dict]:
    """All rows of a results file. A torn last line (a crash mid-write) is skipped with a
    warning; any other line that is not a JSON object raises RowsError naming file and line."""
    rows = []
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    last = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if not isinstance(row, dict):
                raise ValueError(f"a JSON {type(row).__name__}, not an object")
        except ValueError as e:
            why = f"{e.msg} at column {e.colno}" if isinstance(e, json.JSONDecodeError) else e
            if i == last:
                warnings.warn(
                    f"{path}: ignoring torn last line {i + 1} (an interrupted write?)", stacklevel=2
                )
                continue
            raise RowsError(
                f"{path}:{i + 1}: corrupt line, not a JSON row ({why}); only a torn "
                "last line is skipped: repair or delete this line"
            ) from None
        rows.append(row)
    return rows


def format_row(row: dict) -> str:
    """A short human summary of one evaluation row."""
    lines = [
        f"model {row['model']}" + (f" + {row['adapter']}" if row["adapter"] else " (base)"),
        f"tasks {row['tasks']}  n={row['n']} T={row['temperature']} seed={row['seed']}"
        f"  max_tokens={row['max_tokens']}" + (f"  tag={row['tag']}" if row["tag"] else ""),
    ]
    table = [
        ("runs", f"{row['run_pct']:.1f}%"),
        (
            "pass@1 (greedy)",
            (
                f"{row['pass1_pct']:.1f}%  [95% CI {row['wilson_lo']:.0f}-"
                f"{row['wilson_hi']:.0f}%]  ({row['pass1']}/{row['tasks']})"
            ),
        ),
        ("near pass", f"{row['near_pct']:.1f}%"),
        ("avg osim", f"{row['avg_osim']:.3f}"),
        ("truncated", f"{row['truncation_pct']:.1f}%"),
    ]
    for kk, v in row["pass_at_k"].items():
        table.append((f"pass@{kk} (unbiased)", f"{v:.1f}%"))
    if row["n"]:
        table.append((f"greedy or any of {row['k']}", f"{row['greedy_or_k_pct']:.1f}%"))
    b = row.get("bestofk")
    if b:
        table.append(
            (
                f"best-of-{b['k']} deploy",
                (
                    f"{b['deploy_pct']:.1f}%  (coverage {b['coverage_pct']:.1f}%, oracle "
                    f"{b['oracle_pct']:.1f}%)"
                ),
            )
        )
    width = max(len(a) for a, _ in table)
    lines += [f"  {a:<{width}}  {v}" for a, v in table]
    fams = "  ".join(
        f"{f}: {p}/{t}" + (" (anecdote)" if t <= 2 else "")
        for f, (p, t) in sorted(row["by_family"].items())
    )
    lines.append(f"  by family: {fams}")
    return "\n".join(lines)


# -------------------------------------------------------------------------------------------
# a ladder cell's rows: at most one per (cell key, kind)
# -------------------------------------------------------------------------------------------


def rows_by_key(results: str | os.PathLike) -> dict[str, set[str]]:
    """{cell key: kinds present} in a results file ({} when there is none; a torn last line is
    skipped silently here, `jacrl ladder show` and the analysis notebook report it; a corrupt
    middle line raises RowsError)."""
    if not Path(results).is_file():
        return {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        rows = read_rows(results)
    out: dict[str, set[str]] = {}
    for r in rows:
        if r.get("cell_key"):
            out.setdefault(r["cell_key"], set()).add(r.get("kind", ""))
    return out


def is_done(present: Mapping[str, set[str]], key: str) -> bool:
    """Whether the cell `key` has all its rows in `present` (from `rows_by_key`)."""
    return set(KINDS) <= present.get(key, set())


def append_cell_rows(results: str | os.PathLike, rows: Sequence[dict]) -> int:
    """Append the rows whose (cell_key, kind) is not in the file yet, each with one write + fsync
    (`append_row`), holding an exclusive lock on `<results>.lock` meanwhile so a straggler and a
    resumed run cannot both append. Returns how many were appended."""
    results = Path(results)
    results.parent.mkdir(parents=True, exist_ok=True)
    with open(results.with_name(results.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        present = rows_by_key(results)
        n = 0
        for row in rows:
            if row.get("kind") in present.get(row["cell_key"], set()):
                continue
            append_row(results, row)
            present.setdefault(row["cell_key"], set()).add(row["kind"])
            n += 1
        return n
