"""What runs on a Ray node for the ladder's Ray engine (`jacrl.ladder.ray_engine`): a cell's
inputs and outputs as bytes, the content-addressed install of a shipped artifact, and `cell_task`,
one cell run by the local engine's `run_cell` in a scratch project on the node.

A node is a machine that ran `ray start` with JACRL_ROOT=<its checkout of this project> (else its
project is found from the worker's directory): its models/registry.toml names the models, its
artifacts/ (or $JACRL_RAY_ARTIFACTS) is the node's store, its .git gives the commit rows record. A
cell checks the model (there, with the driver's files) and the jacrl code version (the driver's),
then runs in a fresh project `$JACRL_RAY_SCRATCH/<cell key>/<attempt>/` (default
<tmp>/jacrl-ray-<uid>/...) holding the data and notebook that came with it, so the notebook
resolves everything as on the driver. The attempt's results/ (log, executed notebook, rows) stay
there; its data are removed."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import io
import json
import os
import shutil
import socket
import tarfile
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path

import ray  # the optional `ray` extra: this module is imported only for --engine ray

from jacrl.ladder.plan import Cell, cell_modules, model_fingerprint
from jacrl.ladder.run import run_cell
from jacrl.ladder.settings import LadderConfig
from jacrl.ladder.status import cell_dir
from jacrl.models.registry import ModelError, read_registry, resolve
from jacrl.project import MARKER, ROOT_ENV, Project, ProjectNotFound, find_root, project
from jacrl.provenance import code_of
from jacrl.results import read_rows
from jacrl.train import Artifact

SCRATCH_ENV = "JACRL_RAY_SCRATCH"
STORE_ENV = "JACRL_RAY_ARTIFACTS"  # the node's artifact store (default: its project's artifacts/)
NOT_SHIPPED = {"lock", "status.json"}  # of a cell's directory: the driver writes its own


# -------------------------------------------------------------------------------------------
# bytes on the wire: a directory, an artifact
# -------------------------------------------------------------------------------------------


def pack_dir(
    path: str | os.PathLike,
    arcname: str | None = None,
    skip: frozenset[str] | set[str] = frozenset(),
) -> bytes:
    """A directory as tar.gz bytes, under `arcname` (default: its name; "" = its entries at the
    top), leaving out the top-level entries named in `skip`."""
    path = Path(path)
    arcname = path.name if arcname is None else arcname
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:  # adapters barely shrink
        for entry in sorted(path.iterdir()):
            if entry.name not in skip:
                tar.add(entry, arcname=f"{arcname}/{entry.name}" if arcname else entry.name)
    return buf.getvalue()


def unpack(blob: bytes, dest: str | os.PathLike) -> None:
    """Extract `pack_dir` bytes into dest; members may not leave it (tarfile's data filter)."""
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:*") as tar:
        tar.extractall(dest, filter="data")


def artifact_key(path: str | os.PathLike) -> str | None:
    """The key of the complete artifact at path, else None."""
    try:
        return Artifact.load(path).key
    except (OSError, ValueError, KeyError):
        return None


def pack_artifact(path: str | os.PathLike) -> bytes:
    if artifact_key(path) is None:
        raise FileNotFoundError(f"{path} is not a complete artifact")
    return pack_dir(path)


def install_artifact(blob: bytes, store: str | os.PathLike) -> Path:
    """Put a packed artifact into the content-addressed store under its own name, unless a
    complete one with the same key is there. Extracted beside it and moved in with one rename,
    under the store's per-name lock (the one training takes), so readers never see it half."""
    store = Path(store)
    store.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(blob), mode="r:*") as tar:
        (name,) = {m.name.split("/", 1)[0] for m in tar.getmembers()}
    final = store / name
    with open(store / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        tmp = store / f".{name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            unpack(blob, tmp)
            key = artifact_key(tmp / name)
            if key is None:
                raise ValueError(f"the packed artifact {name} is not complete")
            if artifact_key(final) != key:
                if final.exists():
                    shutil.rmtree(final)  # incomplete, or another key under the same name
                os.replace(tmp / name, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return final


# -------------------------------------------------------------------------------------------
# the cell on its node
# -------------------------------------------------------------------------------------------


def node_problem(cell: Cell) -> str:
    """Why this node cannot run the cell (one line), or ""."""
    host = socket.gethostname()
    try:
        find_root()
    except ProjectNotFound as e:
        return f"node {host}: {e} (start its Ray with JACRL_ROOT=<checkout> ray start ...)"
    try:
        resolve(cell.model)
    except (ModelError, OSError) as e:
        return f"model {cell.model!r} is not on node {host}: {e}"
    if model_fingerprint(cell.model) != cell.key_parts.get("model_hash"):
        return f"model {cell.model!r} on node {host} has other files than the driver's"
    if code_of(cell_modules(cell.condition)) != cell.key_parts.get("code_version"):
        return f"node {host} runs another jacrl code version than the driver (update its checkout)"
    return ""


def scratch_project(key: str, data: bytes, notebook: tuple[str, bytes]) -> Path:
    """A fresh project for one attempt at the cell, so the notebook finds everything where a
    project keeps it: the shipped data/ and notebooks/<notebook>, a models/registry.toml naming
    this node's models by absolute path, results/, and .git linked to the node's checkout (rows
    record its commit). Earlier attempts' data are removed; their results stay."""
    base = (
        Path(
            os.environ.get(SCRATCH_ENV) or Path(tempfile.gettempdir()) / f"jacrl-ray-{os.getuid()}"
        )
        / key
    )
    for old in base.glob("*/data"):
        shutil.rmtree(old, ignore_errors=True)
    node = project()
    work = base / uuid.uuid4().hex[:8]
    (work / "notebooks").mkdir(parents=True)
    shutil.copy(node.root / MARKER, work / MARKER)
    unpack(data, work / "data")
    (work / "notebooks" / notebook[0]).write_bytes(notebook[1])
    (work / "models").mkdir()
    entries = [
        f"[models.{json.dumps(name)}]\npath = {json.dumps(str(resolve(name)))}\n"
        for name in read_registry(node.registry)
        if _resolves(name)
    ]
    (work / "models" / "registry.toml").write_text("\n".join(entries))
    if (node.root / ".git").exists():
        (work / ".git").symlink_to(node.root / ".git")
    return work


def _resolves(model: str) -> bool:
    try:
        resolve(model)
    except (ModelError, OSError):
        return False
    return True


def localize(
    cfg: LadderConfig,
    cell: Cell,
    work: Path,
    store: Path,
) -> tuple[LadderConfig, Cell]:
    """The config and cell as this node runs them in the scratch project `work`, with the
    node's artifact store."""
    proj = Project(work)

    def here(c: LadderConfig) -> LadderConfig:
        return dataclasses.replace(
            c,
            data_dir=str(proj.data),
            results_dir=str(proj.results),
            figures_dir=str(proj.figures),
            artifacts_dir=str(store),
            notebook=str(proj.notebooks / Path(c.notebook).name),
        )

    rcfg, rcell = here(cfg), dataclasses.replace(cell, cfg=here(cell.cfg))
    return rcfg, rcell


@contextlib.contextmanager
def project_env(root: Path):
    """JACRL_ROOT = root meanwhile (what `run_cell` runs papermill in, and passes on)."""
    old = os.environ.get(ROOT_ENV)
    os.environ[ROOT_ENV] = str(root)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ROOT_ENV, None)
        else:
            os.environ[ROOT_ENV] = old


def _where() -> dict:
    return {
        "node": ray.get_runtime_context().get_node_id(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
    }


@ray.remote(num_returns=2)
def cell_task(
    cfg: LadderConfig,
    cell: Cell,
    data: bytes,
    notebook: tuple[str, bytes],
    parent: Mapping[str, bytes] | None,
    progress,
) -> tuple[dict, dict]:
    """Run one cell on this node: (result, {stage: artifact bytes}). result holds status,
    error, rows, files (the cell directory as bytes), node, host, pid, log (its path here).
    Every error is a failed result; only a dead worker or node makes Ray retry."""
    where = _where()
    try:
        problem = node_problem(cell)
        if problem:
            return {**where, "status": "failed", "error": problem, "rows": []}, {}
        store = Path(os.environ.get(STORE_ENV) or project().artifacts)
        for blob in (parent or {}).values():
            install_artifact(blob, store)
        work = scratch_project(cell.key, data, notebook)
        rcfg, rcell = localize(cfg, cell, work, store)
        log = cell_dir(rcfg, rcell) / "log.txt"
        if progress is not None:
            progress.started.remote(cell.key, {**where, "log": str(log)})
        # Ray caps a task's OMP_NUM_THREADS at its CPUs (1); the cell owns its node's `mlx`, so
        # it runs with the node's BLAS threads, as under the local engine (cap a node's with
        # OPENBLAS_NUM_THREADS / VECLIB_MAXIMUM_THREADS in its `ray start` environment)
        os.environ.pop("OMP_NUM_THREADS", None)
        with project_env(work):
            status = run_cell(rcfg, rcell, log=lambda _line: None)
        shutil.rmtree(work / "data", ignore_errors=True)
        rows = [
            r
            for r in (read_rows(rcell.results) if Path(rcell.results).is_file() else [])
            if r.get("cell_key") == cell.key
        ]
        paths = (rows[-1].get("ladder") or {}).get("artifacts", {}) if rows else {}
        arts = {stage: pack_artifact(p) for stage, p in paths.items()}
        result = {
            **where,
            **{k: status.get(k) for k in ("status", "error", "seconds", "command", "returncode")},
            "rows": rows,
            "log": str(log),
            "files": pack_dir(cell_dir(rcfg, rcell), "", NOT_SHIPPED),
        }
        return result, arts
    except Exception as e:  # noqa: BLE001 -- any error is the cell's, reported in one line
        return {
            **where,
            "status": "failed",
            "rows": [],
            "error": f"{type(e).__name__}: {e}".splitlines()[0],
        }, {}


@ray.remote(num_cpus=0)
class Progress:
    """Where each cell's current attempt runs ({key: node, host, pid, log}) and how many
    attempts it had; cells report here when they start, the driver reads it."""

    def __init__(self):
        self.running: dict[str, dict] = {}
        self.attempts: dict[str, int] = {}

    def started(self, key: str, where: dict) -> None:
        self.running[key] = where
        self.attempts[key] = self.attempts.get(key, 0) + 1

    def snapshot(self) -> tuple[dict, dict]:
        return dict(self.running), dict(self.attempts)
