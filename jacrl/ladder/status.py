"""A ladder cell's directory, status file and lock, shared by the engines: results/cells/<key>/
holds status.json (queued | running | done | failed | ...), the lock a running cell holds, and
what the cell left (log, executed notebook, metrics).

Owns: `cell_dir`, `write_status` / `read_status`, `claim_cell` (the flock), `cell_state`
and its words for a reader (`STATE_TEXT`, `state_text`), `interrupted_cells`.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from jacrl.ladder.plan import Cell
from jacrl.ladder.settings import LadderConfig
from jacrl.project import path_or

# a cell's state (`cell_state`) as plans and records print it, for a cell without rows
STATE_TEXT = {
    "running": "running now",
    "interrupted": "interrupted (killed; to rerun)",
    "failed": "failed (to rerun)",
}


def cell_dir(cfg: LadderConfig, cell: Cell) -> Path:
    return path_or(cfg.results_dir, "results").resolve() / "cells" / cell.key


def write_status(path: Path, status: dict) -> None:
    """Replace the status file at once (a temp file renamed), so a reader never sees half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(status, indent=1) + "\n")
    os.replace(tmp, path)


def read_status(path: Path) -> dict:
    """The status written there; {} when there is none (or it cannot be read)."""
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def claim_cell(d: Path):
    """The cell's lock (an open file holding an exclusive flock), or None when another process
    runs the cell. The kernel drops a dead process's flock, so a killed run's cell is free again."""
    d.mkdir(parents=True, exist_ok=True)
    fh = open(d / "lock", "w")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        return None
    return fh


def cell_state(d: Path) -> str:
    """`running` (a live process holds the cell), `interrupted` (its status says running but no
    one holds it: the run was killed), else the last status written (`done`, `failed`) or ""."""
    status = read_status(d / "status.json").get("status", "")
    if status != "running":
        return status
    lock = claim_cell(d)
    if lock is None:
        return "running"
    lock.close()
    return "interrupted"


def state_text(states: list[str]) -> str:
    """The first of STATE_TEXT's states found in `states` (cells without rows), else "to run"."""
    return next((STATE_TEXT[s] for s in STATE_TEXT if s in states), "to run")


def interrupted_cells(results_dir: str | os.PathLike) -> list[str]:
    """Names of cells whose run was killed (status `running`, nobody holding them)."""
    cells = Path(results_dir) / "cells"
    return sorted(
        read_status(d / "status.json").get("cell", d.name)
        for d in (cells.iterdir() if cells.is_dir() else ())
        if d.is_dir() and cell_state(d) == "interrupted"
    )
