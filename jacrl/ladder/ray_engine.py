"""The Ray engine of `jacrl ladder run --engine ray`: the same plan, cell keys and papermill run per
cell as the local engine, each cell a Ray task placed on any node of a cluster.

One machine: nothing to set up; with no address (and no RAY_ADDRESS) a local Ray instance is
started, offering one `mlx` (cells run one at a time, in this project, artifacts straight into
the ladder's store). Several machines (Macs, or CUDA boxes with `mlx[cuda]`), each with
this project checked out, `pip install -e '.[ray]'`, and the models the plan names (models are
local paths and never shipped):

    mac1$ JACRL_ROOT=~/jacrl ray start --head --port 6379 --resources '{"mlx": 1}'
    mac2$ JACRL_ROOT=~/jacrl ray start --address mac1:6379 --resources '{"mlx": 1}'
    mac1$ jacrl ladder run --engine ray --address mac1:6379

Placement: a cell asks for `CELL_CPUS` CPU and one `mlx`. A node offers one `mlx` per
accelerator, so two cells never share one; a node started without it runs no cells.

No shared filesystem: a cell travels with its task data and notebook as bytes and runs on its node
in a scratch project (`jacrl.ladder.ray_cell`), after checking that the node has the driver's model
files and jacrl code version (else it fails in one line); its rows, its cell directory (log,
executed notebook, metrics) and its artifacts come back as bytes. The driver alone appends rows
(the local engine's lock and dedup) and installs artifacts into its own content-addressed store;
the rows name the driver's paths, as the local engine's do.

DAG: a cell whose first stage's artifact is shared and followed by another stage
(`jacrl.conditions`' `Condition.shares`: the gold SFT of sft_grpo, sft_grpo_tuned, sft_rft,
sft_dpo) gets the artifact of the cell that trains that stage alone (same rung, model, seed,
format and stage config) as a Ray object dependency: it starts after that cell, on any node, and
reuses the artifact instead of training it again. Other cells run in parallel. A cell whose rows
exist is skipped, one another `ladder run` holds is left to it (the local engine's cell lock, held
here while the cell is submitted), none is submitted twice.

Faults: a worker process or node that dies mid-cell makes Ray rerun the cell (`RETRIES` more
attempts), then it is recorded failed with the reason. Only a finished attempt returns rows, so a
cell's rows are appended once. A killed driver: Ray ends its cells; rerun the command, finished
cells are skipped. Progress: the ladder's bar shows each running cell and its node; a line per
attempt names the node and the log there.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import ray  # the optional `ray` extra: this module is imported only for --engine ray
from tqdm.auto import tqdm

from jacrl import conditions
from jacrl.conditions import condition_of
from jacrl.ladder.plan import Cell
from jacrl.ladder.ray_cell import (
    Progress,
    artifact_key,
    cell_task,
    install_artifact,
    pack_artifact,
    pack_dir,
    unpack,
)
from jacrl.ladder.ray_connect import RESOURCE, connect
from jacrl.ladder.run import Engine
from jacrl.ladder.settings import LadderConfig
from jacrl.ladder.status import cell_dir, claim_cell, write_status
from jacrl.models.registry import portable
from jacrl.provenance import now
from jacrl.results import append_cell_rows, is_done, read_rows, rows_by_key

RETRIES = 2  # reruns of a cell whose worker process or node died, before it is recorded failed
CELL_CPUS = 1  # CPUs a cell asks for; its `mlx` resource is what keeps cells apart


# -------------------------------------------------------------------------------------------
# the DAG
# -------------------------------------------------------------------------------------------


def shared_parents(cells: list[Cell]) -> dict[str, Cell]:
    """{key of a cell whose first stage's artifact is shared and followed by another stage
    (`Condition.shares`: sft_grpo's gold SFT): the plan's cell that trains that stage alone,
    whose artifact it reuses}: same rung, model, seed, task format and resolved config of that
    stage (so the same content-addressed artifact)."""

    def group(c: Cell, condition: str) -> tuple:
        return c.rung, c.model, c.train_seed, c.format, c.paired, condition

    alone = {group(c, c.condition): c for c in cells}
    out = {}
    for c in cells:
        first = condition_of(c.condition).shares
        p = alone.get(group(c, conditions.alone(first))) if first else None
        if p is not None and p.stages[first] == c.stages[first]:
            out[c.key] = p
    return out


def stored_artifacts(rows: list[dict], key: str) -> dict[str, bytes]:
    """{stage: bytes} of a finished cell's artifacts from the driver's store (its rows name
    them); {} when they are gone."""
    for r in reversed(rows):
        if r.get("cell_key") == key:
            paths = (r.get("ladder") or {}).get("artifacts", {})
            return {s: pack_artifact(p) for s, p in paths.items() if artifact_key(p)}
    return {}


def localize_rows(rows: list[dict], cell: Cell, installed: dict[str, Path]) -> list[dict]:
    """A node's rows as the local engine would have written them here: the model and the
    artifacts named by the driver's paths, the adapter the cell's last stage's (`adapter_of`)."""
    last = installed.get(condition_of(cell.condition).last)
    out = []
    for r in rows:
        r = {**r, "model": portable(cell.model)}
        if last is not None:
            r["adapter"] = portable(last)
        if r.get("ladder"):
            r["ladder"] = {**r["ladder"], "artifacts": {s: str(p) for s, p in installed.items()}}
        out.append(r)
    return out


# -------------------------------------------------------------------------------------------
# the driver
# -------------------------------------------------------------------------------------------


class Driver:
    """Submits the cells, follows them, files their results; see `run_cells`."""

    def __init__(
        self,
        cfg: LadderConfig,
        plan: list[Cell],
        heads: dict[str, str],
        log: Callable[[str], None],
        bar,
    ):
        self.cfg, self.heads, self.log, self.bar = cfg, heads, log, bar
        self.results = cfg.results_file.resolve()
        self.parents = shared_parents(plan)
        # on the head node, which outlives every other (Ray's own resource naming the head)
        self.progress = Progress.options(resources={"node:__internal_head__": 0.001}).remote()
        nb = Path(cfg.notebook)
        self.data = ray.put(pack_dir(cfg.data_dir, ""))  # all of it: tasks, splits, conversions
        self.notebook = ray.put((nb.name, nb.read_bytes()))
        self.pending: dict = {}  # result ref -> cell
        self.refs: dict[str, object] = {}  # cell key -> its result's ref
        self.arts: dict[str, object] = {}  # cell key -> its artifacts' ref
        self.orphans: set[str] = set()  # cells resubmitted without their dead sft cell's artifact
        self.shown: dict[str, int] = {}  # cell key -> attempts reported
        self.statuses: dict[str, dict] = {}

    def parent_input(self, cell: Cell):
        """The shared artifact the cell reuses: the ref of its parent cell submitted in this
        run, or the bytes of one finished earlier, or None (the cell trains that stage itself)."""
        p = self.parents.get(cell.key)
        if p is None:
            return None
        if p.key in self.arts:
            return self.arts[p.key]
        rows = read_rows(self.results) if self.results.is_file() else []
        stored = stored_artifacts(rows, p.key)
        first = condition_of(cell.condition).shares
        return {first: stored[first]} if first in stored else None

    def submit(self, cell: Cell, parent) -> None:
        result, arts = cell_task.options(
            num_cpus=CELL_CPUS,
            resources={RESOURCE: 1},
            max_retries=RETRIES,
            retry_exceptions=False,
            name=cell.name,
        ).remote(self.cfg, cell, self.data, self.notebook, parent, self.progress)
        self.pending[result] = cell
        self.refs[cell.key], self.arts[cell.key] = result, arts
        write_status(
            cell_dir(self.cfg, cell) / "status.json",
            {
                "key": cell.key,
                "cell": cell.name,
                "status": "queued",
                "engine": "ray",
                "submitted": now(),
            },
        )

    def parent_died(self, cell: Cell) -> bool:
        """Whether the cell was given an sft cell's result that failed to come (its worker or
        node died every attempt); once per cell."""
        p = self.parents.get(cell.key)
        ref = self.refs.get(p.key) if p is not None else None
        if ref is None or cell.key in self.orphans:
            return False
        try:
            ray.get(ref, timeout=0)
        except ray.exceptions.GetTimeoutError:
            return False
        except ray.exceptions.RayError:
            self.orphans.add(cell.key)
            return True
        return False

    def follow(self) -> None:
        """Report each attempt that started (its node and log) and show the running cells."""
        try:
            running, attempts = ray.get(self.progress.snapshot.remote(), timeout=10)
        except ray.exceptions.RayError:  # progress is lost, the cells are not
            return
        for key, where in running.items():
            cell = next((c for c in self.pending.values() if c.key == key), None)
            if cell is None or self.shown.get(key) == attempts[key]:
                continue
            self.shown[key] = attempts[key]
            again = f" again (attempt {attempts[key]})" if attempts[key] > 1 else ""
            self.log(
                f"{self.heads[key]}: running{again} on {where['host']} (node "
                f"{where['node'][:8]}, log: {where['log']})"
            )
            write_status(
                cell_dir(self.cfg, cell) / "status.json",
                {
                    "key": key,
                    "cell": cell.name,
                    "status": "running",
                    "engine": "ray",
                    "started": now(),
                    "attempt": attempts[key],
                    **where,
                },
            )
        if self.bar is not None:
            self.bar.set_postfix_str(
                ", ".join(
                    f"{c.name} on {running[c.key]['host']}:{running[c.key]['node'][:8]}"
                    for c in self.pending.values()
                    if c.key in running
                )
            )

    def collect(self, ref) -> None:
        """File the result of a finished (or finally failed) cell."""
        cell = self.pending.pop(ref)
        try:
            result, arts = ray.get(ref), ray.get(self.arts[cell.key])
        except ray.exceptions.RayError as e:
            if self.parent_died(cell):  # then train the SFT stage itself, as the local engine
                self.submit(cell, None)
                return
            attempts = self.shown.get(cell.key, 0)
            result = {
                "status": "failed",
                "rows": [],
                "error": (
                    f"{type(e).__name__} after {attempts} attempt(s): "
                    + (str(e).strip().splitlines() or [""])[0]
                )[:500],
            }
            arts = {}
        self.statuses[cell.key] = st = self.finish(cell, result, arts)
        self.log(
            f"{self.heads[cell.key]}: {st['status']} in {st.get('seconds') or 0:.0f} s"
            + (f" on {st['host']}" if st.get("host") else "")
            + (f" — {st['error']}" if st.get("error") else "")
        )
        if self.bar is not None:
            self.bar.update(1)

    def finish(self, cell: Cell, result: dict, arts: dict[str, bytes]) -> dict:
        """Install the cell's artifacts and files, append its rows once, write its status."""
        d = cell_dir(self.cfg, cell)
        if result.get("files"):
            unpack(result["files"], d)
        installed = {s: install_artifact(b, self.cfg.artifacts_dir) for s, b in arts.items()}
        rows = localize_rows(result.get("rows") or [], cell, installed)
        if rows:
            append_cell_rows(self.results, rows)
        done = result.get("status") == "done" and is_done(rows_by_key(self.results), cell.key)
        status = {
            "key": cell.key,
            "cell": cell.name,
            "status": "done" if done else "failed",
            "engine": "ray",
            "finished": now(),
            "attempts": self.shown.get(cell.key, 0),
            **{
                k: result[k]
                for k in ("node", "host", "pid", "log", "seconds", "command", "returncode")
                if result.get(k) is not None
            },
            "planned": json.loads(cell.to_json()),
            "key_parts": cell.key_parts,
        }
        if not done:
            status["error"] = (
                result.get("error") or "the notebook finished without writing both rows"
            )
        write_status(d / "status.json", status)
        return status


def run_cells(
    cfg: LadderConfig,
    plan: list[Cell],
    todo: list[Cell],
    heads: dict[str, str],
    log: Callable[[str], None],
    bar=None,
    address: str | None = None,
) -> list[dict]:
    """Run `todo` (cells of `plan` whose rows are missing and whose locks this process holds) on
    the Ray cluster at `address` (None: RAY_ADDRESS, else a local instance); their statuses in
    the order given. `heads` names each cell in log lines; `bar` (tqdm) advances per cell."""
    if not todo:
        return []
    started = connect(address, cfg.artifacts_dir, log)
    try:
        drv = Driver(cfg, plan, heads, log, bar)
        pending = set(c.key for c in todo)
        for cell in sorted(
            todo,
            key=lambda c: (
                c.key in drv.parents  # sft cells first
                and drv.parents[c.key].key in pending
            ),
        ):
            drv.submit(cell, drv.parent_input(cell))
        while drv.pending:
            ready, _ = ray.wait(list(drv.pending), num_returns=1, timeout=1.0)
            drv.follow()
            for ref in ready:
                drv.collect(ref)
        return [drv.statuses[c.key] for c in todo]
    finally:
        if started:
            ray.shutdown()


def claim(
    cfg: LadderConfig, cells: list[Cell], heads: dict[str, str], log: Callable[[str], None]
) -> tuple[list[Cell], dict, dict]:
    """(cells to run, their locks, statuses of the others): skipped when their rows exist, busy
    when another process holds them."""
    present = rows_by_key(cfg.results_file.resolve())
    todo, locks, statuses = [], {}, {}
    for cell in cells:
        skipped = {"key": cell.key, "cell": cell.name, "status": "skipped"}
        if is_done(present, cell.key):
            log(f"{heads[cell.key]}: rows exist, skipped")
            statuses[cell.key] = skipped
            continue
        lock = claim_cell(cell_dir(cfg, cell))
        if lock is None:
            log(f"{heads[cell.key]}: being run by another process, skipped")
            statuses[cell.key] = {**skipped, "status": "busy"}
            continue
        todo.append(cell)
        locks[cell.key] = lock
    present = rows_by_key(cfg.results_file.resolve())  # finished by another process meanwhile
    for cell in [c for c in todo if is_done(present, c.key)]:
        log(f"{heads[cell.key]}: rows exist, skipped")
        statuses[cell.key] = {"key": cell.key, "cell": cell.name, "status": "skipped"}
        todo.remove(cell)
        locks.pop(cell.key).close()
    return todo, locks, statuses


def ray_engine(
    address: str | None = None, log: Callable[[str], None] = print, progress: bool = True
) -> Engine:
    """The engine that runs the cells as Ray tasks on the cluster at `address` (None:
    RAY_ADDRESS, else a local Ray instance); its statuses come in the order given."""

    def engine(cfg: LadderConfig, cells: list[Cell]) -> list[dict]:
        bar = tqdm(total=len(cells), desc="ladder", unit="cell", disable=not progress)
        say = bar.write if progress and log is print else log  # lines above the bar
        heads = {c.key: f"[{i}/{len(cells)}] {c.name} ({c.key})" for i, c in enumerate(cells, 1)}
        todo, locks, statuses = claim(cfg, cells, heads, say)
        bar.update(len(cells) - len(todo))
        t0 = time.time()
        try:
            for st in run_cells(cfg, cells, todo, heads, say, bar, address):
                statuses[st["key"]] = st
        finally:
            for lock in locks.values():
                lock.close()
            bar.close()
        if todo:
            say(f"ray: {len(todo)} cells in {time.time() - t0:.0f} s")
        return [statuses[c.key] for c in cells]

    return engine
