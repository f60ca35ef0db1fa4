"""Running the ladder: each cell is one papermill run of the training notebook, in its own
directory results/cells/<key>/ (the executed notebook, log.txt, status.json, the artifacts'
metrics). A cell is held by an exclusive flock while it runs, so concurrent `ladder run`s split
the cells; a failing cell is recorded and the ladder goes on.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import resource
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tqdm.auto import tqdm

from jacrl import jsonl
from jacrl.blas import fast_blas_env
from jacrl.kernel import for_cells
from jacrl.ladder.plan import Cell, plan
from jacrl.ladder.settings import RESULTS_FILE, LadderConfig, validate
from jacrl.ladder.status import (
    cell_dir,
    cell_state,
    claim_cell,
    interrupted_cells,
    state_text,
    write_status,
)
from jacrl.project import CELL_TIMES_FILE, find_root, path_or
from jacrl.provenance import now
from jacrl.results import is_done, read_rows, rows_by_key

# where cells run: a function (configuration, cells) -> their statuses, in the order given; the
# local one here, the Ray one in ray_engine; the top floor (the CLI, a caller) picks one
Engine = Callable[[LadderConfig, list[Cell]], list[dict]]
PR_SET_PDEATHSIG = 1  # prctl option: the signal a child gets when its parent dies
SIGKILL = 9


def command(cfg: LadderConfig, cell: Cell) -> list[str]:
    """The papermill command (`jacrl.papermill_main`) that runs the cell (in the project root), on
    the `jacrl` kernel when it is installed for this interpreter (jacrl.kernel; OpenBLAS
    preloaded), else on python3. The cell travels as one parameter, `cell_json` (the notebook's
    others are for hand use)."""
    out = cell_dir(cfg, cell) / Path(cfg.notebook).name
    cmd = [
        sys.executable,
        "-m",
        "jacrl.papermill_main",
        str(Path(cfg.notebook).resolve()),
        str(out),
        "--cwd",
        str(find_root()),
        "--log-output",
        "--no-progress-bar",
        "-k",
        for_cells(),
    ]
    return cmd + ["-r", "cell_json", cell.to_json()]


def notebook_error(nb_path: Path, log_path: Path) -> str:
    """`Name: message` of the first error output of an executed notebook, else the log's tail."""
    try:
        nb = json.loads(nb_path.read_text())
        for c in nb.get("cells", []):
            for o in c.get("outputs", []):
                if o.get("output_type") == "error":
                    return f"{o.get('ename')}: {o.get('evalue')}"
    except (OSError, ValueError):
        pass
    try:
        lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    errs = [ln for ln in lines if re.match(r"^\w*(Error|Exception)\b", ln.strip())]
    return (errs[-1] if errs else "\n".join(lines[-5:]))[-2000:]


# -------------------------------------------------------------------------------------------
# running one cell
# -------------------------------------------------------------------------------------------


def kernel_env() -> dict[str, str]:
    """The cell's environment: ours + OpenBLAS preloaded (Linux) + this venv first on PATH."""
    env = {
        **os.environ,
        **fast_blas_env(),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
    }
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


def _prctl():
    """libc's prctl, looked up in the parent (the forked child must not import or lock)."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def _die_with_parent(prctl):
    """preexec_fn for the papermill child: SIGKILL when the ladder process dies (kept across
    exec); the kernel then sees its parent gone and exits, so a killed ladder leaves no orphan
    cell running. Calls only the pre-resolved function."""
    if prctl is None:
        return None
    return lambda: prctl(PR_SET_PDEATHSIG, SIGKILL)


def _papermill(cmd: list[str], log_path: Path, timeout: int) -> tuple[int | None, str]:
    """Run the command, its output to log_path; (return code, "") or (None, the timeout)."""
    with open(log_path, "w") as logf:
        proc = subprocess.Popen(
            cmd,
            stdout=logf,
            stderr=subprocess.STDOUT,
            env=kernel_env(),
            cwd=str(find_root()),
            start_new_session=True,
            preexec_fn=_die_with_parent(_prctl()),
        )  # noqa: PLW1509 (no locks)
        try:
            return proc.wait(timeout=timeout or None), ""
        except subprocess.TimeoutExpired:
            return None, f"timed out after {timeout} s"
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, SIGKILL)
                proc.wait()


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _append_times(cell: Cell, wall: float, cpu: float, load: tuple[float, float]) -> None:
    """One line per finished cell in the results folder (committed with its rows): wall and CPU
    seconds of its notebook run (training + evaluation), and the load average at its start and
    end, so a reader can tell the cell's cost from the host's other work."""
    line = {
        "cell_key": cell.key,
        "cell": cell.name,
        "wall_s": round(wall, 1),
        "cpu_s": cpu,
        "load": [round(x, 2) for x in load],
        "cpus": os.cpu_count(),
        "finished": now(),
    }
    jsonl.append(Path(cell.results).parent / CELL_TIMES_FILE, line)


def run_cell(cfg: LadderConfig, cell: Cell, log: Callable[[str], None] = print) -> dict:
    """Run one cell through papermill; returns (and writes) its status."""
    d = cell_dir(cfg, cell)
    d.mkdir(parents=True, exist_ok=True)
    cmd = command(cfg, cell)
    status = {
        "key": cell.key,
        "cell": cell.name,
        "status": "running",
        "started": now(),
        "pid": os.getpid(),
        "command": shlex.join(cmd),
        "planned": json.loads(cell.to_json()),
        "key_parts": cell.key_parts,
    }
    write_status(d / "status.json", status)
    t0, cpu0, load0 = time.time(), _children_cpu(), os.getloadavg()[0]
    log_path = d / "log.txt"
    rc, error = _papermill(cmd, log_path, cfg.cell_timeout)
    cpu = round(_children_cpu() - cpu0, 1)  # the cell's whole process tree, once reaped
    if rc == 0 and is_done(rows_by_key(cell.results), cell.key):
        status.update(status="done")
        _append_times(cell, time.time() - t0, cpu, (load0, os.getloadavg()[0]))
    else:
        if not error:
            error = (
                notebook_error(d / Path(cfg.notebook).name, log_path)
                if rc
                else "the notebook finished without writing both rows"
            )
        status.update(status="failed", error=error, returncode=rc)
    status.update(finished=now(), seconds=round(time.time() - t0, 1))
    for stage, path in _artifact_paths(cell).items():
        src = Path(path) / "metrics.jsonl"
        if src.is_file():
            shutil.copy(src, d / f"metrics-{stage}.jsonl")
    write_status(d / "status.json", status)
    return status


def _artifact_paths(cell: Cell) -> dict[str, str]:
    rows = read_rows(cell.results) if Path(cell.results).is_file() else []
    for r in reversed(rows):
        if r.get("cell_key") == cell.key:
            return (r.get("ladder") or {}).get("artifacts", {})
    return {}


# -------------------------------------------------------------------------------------------
# the ladder
# -------------------------------------------------------------------------------------------


def _run_once(
    cfg: LadderConfig, cell: Cell, results: Path, head: str, log: Callable[[str], None]
) -> dict:
    """Run the cell unless its rows exist or another process holds it (then `busy`): concurrent
    `ladder run`s split the cells instead of doubling them."""
    skipped = {"key": cell.key, "cell": cell.name, "status": "skipped"}
    if is_done(rows_by_key(results), cell.key):
        log(f"{head}: rows exist, skipped")
        return skipped
    lock = claim_cell(cell_dir(cfg, cell))
    if lock is None:
        log(f"{head}: being run by another process, skipped")
        return {**skipped, "status": "busy"}
    with lock:  # held while the cell runs
        if is_done(rows_by_key(results), cell.key):  # finished by another process meanwhile
            log(f"{head}: rows exist, skipped")
            return skipped
        log(f"{head}: running (log: {cell_dir(cfg, cell) / 'log.txt'})")
        st = run_cell(cfg, cell, log)
    log(
        f"{head}: {st['status']} in {st['seconds']:.0f} s"
        + (f" — {st['error']}" if st.get("error") else "")
    )
    return st


def local_engine(log: Callable[[str], None] = print, progress: bool = True) -> Engine:
    """The engine that runs the cells one after another in this process, each through
    papermill (`run_cell`), with a progress bar unless `progress` is False."""

    def engine(cfg: LadderConfig, cells: list[Cell]) -> list[dict]:
        results = cfg.results_file.resolve()
        bar = tqdm(total=len(cells), desc="ladder", unit="cell", disable=not progress)
        say = bar.write if progress and log is print else log  # lines above the bar
        statuses = []
        for i, cell in enumerate(cells, 1):
            head = f"[{i}/{len(cells)}] {cell.name} ({cell.key})"
            statuses.append(_run_once(cfg, cell, results, head, say))
            bar.update(1)
        bar.close()
        return statuses

    return engine


def run(
    cfg: LadderConfig,
    log: Callable[[str], None] = print,
    progress: bool = True,
    cells: Sequence[Cell] | None = None,
    engine: Engine | None = None,
) -> list[dict]:
    """Run every cell whose rows are missing; keep going past failures. Returns the statuses,
    in plan order. `cells`: these cells instead of `plan(cfg)` (the recipe's stages,
    `run_recipe`); `cfg.recipe` is not read here. `engine`: where the cells run (None:
    `local_engine(log, progress)`; the Ray engine is `jacrl.ladder.ray_engine.ray_engine`, chosen
    by the caller)."""
    cfg = validate(cfg)
    cells = plan(cfg) if cells is None else list(cells)
    statuses = (engine or local_engine(log, progress))(cfg, cells)
    failed = [s for s in statuses if s["status"] == "failed"]
    log(
        f"ladder: {len(cells)} cells, {sum(s['status'] == 'done' for s in statuses)} run, "
        f"{sum(s['status'] == 'skipped' for s in statuses)} skipped, "
        f"{sum(s['status'] == 'busy' for s in statuses)} run elsewhere, {len(failed)} failed"
        + (f" (see {cfg.results_dir}/cells/<key>/status.json)" if failed else "")
    )
    return statuses


def plan_text(cfg: LadderConfig, commands: bool = False) -> str:
    """A table of every cell: its name, training stages, key and status (done: its rows exist;
    else to run, running, interrupted or failed); with `commands`, under each cell the exact
    command that runs it (a papermill run of notebook 30, ~1 KB each)."""
    cfg = validate(cfg)
    cells = plan(cfg)
    present = rows_by_key(cfg.results_file)
    table = [("cell", "stages", "key", "status")] + [
        (
            c.name,
            "+".join(c.stages) or "-",
            c.key,
            "done" if is_done(present, c.key) else state_text([cell_state(cell_dir(cfg, c))]),
        )
        for c in cells
    ]
    widths = [max(len(r[i]) for r in table) for i in range(3)]
    lines = [
        f"{len(cells)} cells; rows -> {cfg.results_file}"
        + ("" if commands else "; --commands: the command that runs each")
    ]
    for i, r in enumerate(table):
        lines.append(
            "  ".join(v.ljust(w) for v, w in zip(r[:3], widths, strict=True)) + "  " + r[3]
        )
        if commands and i:
            lines.append("    " + shlex.join(command(cfg, cells[i - 1])))
    return "\n".join(lines)


def show(
    results_dir: str | os.PathLike | None = None,
    figures_dir: str | os.PathLike | None = "",
    include_stale: bool = False,
    check_figures: bool = True,
    where: Sequence[str] = (),
) -> tuple[str, list[Path]]:
    """The printed table and the figures written (none when figures_dir is None; "" = the
    project's figures/). results_dir None: the project's results/; a file: that rows file. Stale
    rows (made with a model, adapter or tasks no longer on disk) are left out of both unless
    include_stale. The figures carry the rows file's provenance; with check_figures the text ends
    by listing each figure in that folder (None: the project's) whose rows changed since it was
    drawn, or that has no provenance (`report.figures_note`). `where` (KEY=VALUE, e.g. n=8,
    sft.iters=100): the table and figures of only the rows made with those settings
    (`report.where_rows`), the figures in a subfolder named after the filter
    (`report.where_folder`) with the filter in their stamp, so they never replace the figures
    of all the rows."""
    from jacrl import report  # pandas and matplotlib: only for the table and figures

    path = path_or(results_dir, "results")
    path = path if path.is_file() else path / RESULTS_FILE  # a rows file itself, or its folder
    if not path.is_file():  # a missing or empty rows file is an error, never blank figures
        raise FileNotFoundError(f"{path}: no rows file (`jacrl ladder run` writes it)")
    source = report.source_stamp(path)  # before reading: a row appended after makes it stale
    rows = report.load_rows(path)
    if not any(report.cell_of(r) for r in rows):
        raise ValueError(f"{path}: no ladder rows in it")
    text = report.show_text(rows, include_stale, where)
    rows = report.where_rows(rows, where)  # the figures show the rows the table does
    killed = interrupted_cells(path.parent)
    if killed:
        text += f"\ninterrupted (killed mid-run, no rows; rerun `ladder run`): {', '.join(killed)}"
    if not include_stale:
        rows = [r for r in report.mark_stale(rows) if not r["stale"]]
    if where and figures_dir is not None:  # a subset's figures say so, beside the whole rows'
        figures_dir = path_or(figures_dir or None, "figures") / report.where_folder(where)
        source = {**source, "where": list(where)}  # and record it in their stamp
    figs = (
        report.write_figures(rows, figures_dir or None, source)
        if figures_dir is not None and rows
        else []
    )
    note = report.figures_note(figures_dir or None) if check_figures else ""
    return text + (f"\n\n{note}" if note else ""), figs
