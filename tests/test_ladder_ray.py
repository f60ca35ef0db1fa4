"""The ladder's Ray engine (jacrl.ladder.ray_engine) on a real Ray cluster on loopback: a head and a
worker node started here (separate processes, each with its own working directory, project and
scratch: no shared artifacts folder) run jac-tiny cells with tiny iterations: every condition of
the stage table, and one whose stage the table alone adds (tests/new_stage). The rows equal the
local engine's (metrics and cell keys; timings excluded); a worker process or the worker node's
raylet killed mid-cell is retried and leaves exactly one row set per cell; a killed driver's rerun
resumes; a node without the driver's model fails the cell in one line. Plus the artifact shipping
(pack / content-addressed install) on its own."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ray_cluster import Cluster, cmdline, free_port, node_pids, node_project
from tiny_ladder import tiny_ladder_args

from jacrl import ladder
from jacrl.ladder import ray_cell, ray_engine
from jacrl.notebooks import QUICK_SETS
from jacrl.results import read_rows, rows_by_key

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
NEW_STAGE = str(ROOT / "tests" / "new_stage")  # on PYTHONPATH: the stage `resample` is known
# jac-tiny after 3 SFT iterations verifies no sample: threshold 0 keeps any with a body (plumbing)
SAMPLING = {"samples": 2, "threshold": 0.0, "max_tokens": 16}
SETS = {
    "sft": dict(QUICK_SETS["sft"]),
    "grpo": dict(QUICK_SETS["grpo"]),
    "star": {**SAMPLING, "rounds": 1},
    "rft": SAMPLING,
    "dpo": {"samples": 2, "max_tokens": 16, "iters": 2, "batch_size": 1, "steps_per_report": 1},
}
TINY = {
    "models": ("jac-tiny",),
    "sft_iters": 3,
    "grpo_iters": 2,
    "gen_limit": 2,
    "mem_limit": 2,
    "n": 2,
    "k": (1, 2),
    "max_tokens": 16,
    "sets": SETS,
}


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """Head + one worker node, 1 CPU and one `mlx` each; every process ended afterwards. This
    process and the drivers it starts carry the cluster's token meanwhile."""
    base = tmp_path_factory.mktemp("nodes")
    c = Cluster(env={"PYTHONPATH": NEW_STAGE})  # its nodes know the stage `resample`
    saved = {k: os.environ.get(k) for k in c.auth}
    os.environ.update(c.auth)
    try:
        t0 = time.monotonic()
        c.start_node("head", node_project(base / "head"), head=True)
        c.start_node("worker", node_project(base / "worker"))
        print(
            f"\nray cluster: up in {time.monotonic() - t0:.1f} s (head "
            f"{c.nodes['head'].start_s} s, worker {c.nodes['worker'].start_s} s), "
            f"{c.pss_kb() // 1024} MB PSS"
        )
        yield c
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        assert c.stop() == []  # nothing of any node left running


def _cfg(d: Path, conditions: tuple[str, ...], rungs: tuple[str, ...] = ("1",), seed: int = 0):
    return ladder.validate(
        ladder.LadderConfig(
            rungs=rungs,
            conditions=conditions,
            seed=seed,
            data_dir=str(DATA),
            results_dir=str(d / "results"),
            artifacts_dir=str(d / "artifacts"),
            **TINY,
        )
    )


def _comparable(row: dict) -> dict:
    """A row without what differs from run to run: timings, when and with which checkout, the
    adapter's file hash (its manifest records when it was built), the store's folder."""
    row = json.loads(json.dumps(row))
    row.pop("seconds")
    for k in ("time", "git_commit", "adapter_hash"):
        row["provenance"].pop(k)
    row["adapter"] = Path(row["adapter"]).name if row["adapter"] else ""
    row["ladder"]["artifacts"] = {s: Path(p).name for s, p in row["ladder"]["artifacts"].items()}
    return row


def _cell_procs(text: str) -> list[int]:
    """Processes (not this one) whose command line mentions text."""
    return [
        int(p.name)
        for p in Path("/proc").iterdir()
        if p.name.isdigit() and int(p.name) != os.getpid() and text in cmdline(int(p.name))
    ]


def _statuses(results: Path) -> list[dict]:
    out = []
    for p in results.glob("cells/*/status.json"):
        try:
            out.append(json.loads(p.read_text()))
        except ValueError:  # being replaced
            pass
    return out


def _ladder_run(d: Path, rungs: str, seed: int, conditions: str, **tiny) -> list[str]:
    """`jacrl ladder run`'s command line on the tiny ladder (2 mem tasks; `tiny`: more of
    `tiny_ladder_args`), its rows and artifacts under d."""
    args = tiny_ladder_args(d, rungs, conditions, mem_limit=2, **tiny)
    return [sys.executable, "-m", "jacrl.cli", "ladder", "run", "--seed", str(seed), *args]


def _driver(
    d: Path,
    rungs: str,
    seed: int,
    conditions: str = "base",
    engine: str = "ray",
    address: str | None = None,
    sets: dict = SETS,
    env: dict | None = None,
) -> subprocess.Popen:
    """`jacrl ladder run` on jac-tiny with tiny settings (`sets`), in its own process (the
    drivers' way; Ray reads its token settings at process start) with `env` (None: ours), output
    in d/driver.log."""
    argv = [
        *_ladder_run(d, rungs, seed, conditions, iters="sft=3,grpo=2", sets=sets),
        *("--engine", engine, *(("--address", address) if address else ())),
    ]
    d.mkdir(parents=True, exist_ok=True)
    with open(d / "driver.log", "w") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env=env)


def _finish(proc: subprocess.Popen, d: Path) -> str:
    """The driver's output once it exited 0."""
    rc = proc.wait(timeout=900)
    out = (d / "driver.log").read_text()
    assert rc == 0, out[-3000:]
    return out


def _wait_running(results: Path, n: int, proc: subprocess.Popen, timeout: float = 300) -> list:
    """The statuses once n cells run (each with its node, worker pid and log)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        running = [s for s in _statuses(results) if s.get("status") == "running"]
        if len(running) >= n:
            return running
        time.sleep(0.3)
    raise AssertionError(
        f"{n} cells never ran together: {(results.parent / 'driver.log').read_text()[-3000:]}"
    )


def _wait_cell_procs(running: list, proc: subprocess.Popen, timeout: float = 120) -> None:
    """Until every running cell's papermill process is up (its command line holds the key)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if all(_cell_procs(s["key"]) for s in running):
            return
        time.sleep(0.2)
    raise AssertionError(f"the cells' papermill processes never started: {running}")


def _one_row_set_each(results: Path, keys: set[str]) -> None:
    pairs = sorted((r["cell_key"], r["kind"]) for r in read_rows(results / "rl_ladder.jsonl"))
    assert pairs == sorted((k, kind) for k in keys for kind in ("gen", "mem"))


# -------------------------------------------------------------------------------------------
# no cluster: the bytes on the wire, the node's checks
# -------------------------------------------------------------------------------------------


def _artifact(d: Path, key: str, complete: bool = True) -> Path:
    d.mkdir(parents=True)
    (d / "adapters.safetensors").write_bytes(os.urandom(4096))
    (d / "manifest.json").write_text(json.dumps({"key": key, "base_model": {"path": "/m"}}))
    if complete:
        (d / "COMPLETE").write_text(key + "\n")
    return d


def test_an_artifact_ships_as_bytes_into_a_content_addressed_store(tmp_path):
    """Packed on one side, installed on the other under its own name; a complete copy with the
    same key is kept as is, an incomplete or other-key one replaced; an incomplete artifact is
    never packed, and nothing half-extracted is left behind."""
    src = _artifact(tmp_path / "a" / "sft-0123", "k1")
    blob = ray_cell.pack_artifact(src)
    store = tmp_path / "store"
    got = ray_cell.install_artifact(blob, store)
    assert got == store / "sft-0123" and ray_cell.artifact_key(got) == "k1"
    assert (got / "adapters.safetensors").read_bytes() == (
        src / "adapters.safetensors"
    ).read_bytes()
    before = (got / "adapters.safetensors").stat().st_mtime_ns
    ray_cell.install_artifact(blob, store)  # present and complete: left alone
    assert (got / "adapters.safetensors").stat().st_mtime_ns == before
    (got / "COMPLETE").unlink()  # a torn copy is replaced
    assert ray_cell.artifact_key(ray_cell.install_artifact(blob, store)) == "k1"
    shutil.rmtree(got)
    _artifact(got, "other")  # another key under the same name is replaced
    assert ray_cell.artifact_key(ray_cell.install_artifact(blob, store)) == "k1"
    with pytest.raises(FileNotFoundError):
        ray_cell.pack_artifact(_artifact(tmp_path / "b" / "sft-4567", "k2", complete=False))
    assert sorted(p.name for p in store.iterdir()) == [".sft-0123.lock", "sft-0123"]


def test_a_node_without_the_drivers_model_fails_the_cell_in_one_line(tmp_path, monkeypatch):
    """A node whose project lacks the model, or holds other files under its name, refuses the
    cell before any work, with one line naming the model and the node."""
    cell = ladder.plan(_cfg(tmp_path, ("base",)))[0]
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(ROOT / "jacrl.toml", bare)
    monkeypatch.setenv("JACRL_ROOT", str(bare))
    problem = ray_cell.node_problem(cell)
    assert re.match(r"model 'jac-tiny' is not on node \S+: unknown model", problem), problem
    assert "\n" not in problem
    other = node_project(tmp_path / "other")
    cfg = other / "models" / "jac-tiny" / "config.json"
    cfg.write_text(cfg.read_text() + " ")
    monkeypatch.setenv("JACRL_ROOT", str(other))
    assert "has other files than the driver's" in ray_cell.node_problem(cell)
    monkeypatch.setenv("JACRL_ROOT", str(node_project(tmp_path / "same")))
    assert ray_cell.node_problem(cell) == ""


def test_a_cell_depends_on_the_sft_cell_whose_artifact_its_next_stage_continues():
    """The DAG follows the conditions' stages: a cell whose first stage is gold SFT followed by
    another waits for the sft cell; star (its own rounds from the base) and raw_grpo do not."""
    cells = ladder.plan(
        ladder.validate(
            ladder.LadderConfig(
                rungs=("1", "3"), conditions=tuple(ladder.CONDITIONS), data_dir=str(DATA), **TINY
            )
        )
    )
    parents = ray_engine.shared_parents(cells)
    by = {(c.rung, c.condition): c for c in cells}
    assert parents == {
        by[r, c].key: by[r, "sft"]
        for r in ("1", "3")
        for c in ("sft_rft", "sft_grpo", "sft_grpo_tuned", "sft_grpo_lr0", "sft_dpo")
    }


def test_a_ray_row_names_the_adapter_of_its_cells_last_stage(tmp_path):
    """For every condition, the node's rows filed by the driver name the installed artifact of
    the cell's last stage, as the local engine's `adapter_of` does (main 2d52faa named the sft
    adapter for sft_dpo and sft_rft, and none for star)."""
    cells = ladder.plan(_cfg(tmp_path, tuple(ladder.CONDITIONS)))
    for cell in cells:
        installed = {s: tmp_path / "store" / f"{s}-{cell.condition}" for s in cell.stages}
        rows = [{"model": "m", "adapter": "node/path", "ladder": {"artifacts": {}}}]
        (row,) = ray_engine.localize_rows(rows, cell, installed)
        want = str(installed[list(cell.stages)[-1]]) if cell.stages else "node/path"
        assert row["adapter"] == want, cell.condition
        assert row["ladder"]["artifacts"] == {s: str(p) for s, p in installed.items()}


def test_engine_mistakes_are_one_line_errors(tmp_path, monkeypatch, capsys):
    """An unknown engine (flag or JACRL_LADDER_ENGINE) and an address where no cluster listens
    fail at once in one line (Ray itself would retry a dead address for minutes); nothing is
    written."""
    from jacrl.cli import main

    argv = [
        "ladder",
        "run",
        "--rungs",
        "1",
        "--conditions",
        "base",
        "--data-dir",
        str(DATA),
        "--results",
        str(tmp_path / "r"),
    ]
    assert main([*argv, "--engine", "nope"]) == 2
    monkeypatch.setenv("JACRL_LADDER_ENGINE", "nope")
    assert main(argv) == 2
    assert "jacrl: ladder run: engine 'nope': choose from local, ray" in capsys.readouterr().err
    monkeypatch.delenv("JACRL_LADDER_ENGINE")
    t0 = time.monotonic()
    assert main([*argv, "--engine", "ray", "--address", f"127.0.0.1:{free_port()}"]) == 2
    assert time.monotonic() - t0 < 30
    err = capsys.readouterr().err
    assert re.search(r"jacrl: ladder run: no Ray cluster at 127.0.0.1:\d+ \(start one", err), err
    assert not (tmp_path / "r" / "rl_ladder.jsonl").exists()


def _ray_driver(env: dict, d: Path, *extra: str) -> tuple[subprocess.CompletedProcess, float]:
    """`jacrl ladder run --engine ray` of one base cell in its own process with `env` (no
    RAY_* from ours), and how long it took."""
    argv = [*_ladder_run(d, "1", 0, "base"), "--engine", "ray", *extra]
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAY_")}, **env}
    t0 = time.monotonic()
    run = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    return run, time.monotonic() - t0


def test_a_local_ray_that_cannot_start_is_tried_again_then_one_line(tmp_path):
    """Ray failing to start a local instance (here a RAY_TMPDIR too long for its unix sockets)
    is tried once more, then one line saying what failed and what to try, exit 2, no traceback,
    nothing written; in seconds."""
    long_tmp = tmp_path / ("x" * 110)
    long_tmp.mkdir()
    run, took = _ray_driver(
        {
            "RAY_TMPDIR": str(long_tmp),
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": secrets.token_hex(32),
        },
        tmp_path,
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert took < 90
    last = run.stderr.strip().splitlines()[-1]
    assert re.match(
        r"jacrl: ladder run: Ray could not start a local instance \(2 tries\): "
        r".*AF_UNIX path length.* \(try `ray start --head --resources",
        last,
    ), last
    assert "ray: a local instance did not start (" in run.stdout + run.stderr
    assert not (tmp_path / "results" / "rl_ladder.jsonl").exists()


def test_without_an_address_a_local_ray_instance_runs_the_cells(tmp_path):
    """`JACRL_LADDER_ENGINE=ray jacrl ladder run` with no address works on one machine: it starts
    a local Ray instance, runs the cell there, files its rows, and leaves no Ray process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(
        JACRL_LADDER_ENGINE="ray",
        JACRL_TEST_MARK=str(tmp_path),
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN=secrets.token_hex(32),  # Ray's default, minus ~/.ray/auth_token
        JACRL_RAY_SCRATCH=str(tmp_path / "scratch"),
    )
    d = tmp_path / "run"
    argv = _ladder_run(d, "1", 13, "base")  # the engine: JACRL_LADDER_ENGINE
    run = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "ladder: 1 cells, 1 run, 0 skipped" in run.stdout + run.stderr
    (st,) = _statuses(d / "results")
    assert st["status"] == "done" and st["engine"] == "ray" and st["attempts"] == 1
    _one_row_set_each(d / "results", {st["key"]})
    assert st["log"].startswith(str(tmp_path / "scratch" / st["key"]))
    mark, deadline = f"JACRL_TEST_MARK={tmp_path}".encode(), time.monotonic() + 2
    while node_pids(-1, mark) and time.monotonic() < deadline:  # Ray's processes end meanwhile
        time.sleep(0.2)
    assert node_pids(-1, mark) == []


# -------------------------------------------------------------------------------------------
# on the cluster
# -------------------------------------------------------------------------------------------


def test_a_driver_without_the_clusters_token_fails_in_one_line(cluster, tmp_path):
    """Joining a cluster with another token is one line naming the cluster, Ray's reason and
    what to try; Ray's own retries cut to 2 s (RAY_gcs_server_port_wait_time_s) to stay fast."""
    run, took = _ray_driver(
        {
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": "0" * 64,
            "RAY_gcs_server_port_wait_time_s": "2",
        },
        tmp_path,
        "--address",
        cluster.address,
    )
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-3000:]
    assert took < 90
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith(
        f"jacrl: ladder run: Ray could not join the cluster at {cluster.address}: "
    ), last
    assert "InvalidAuthToken" in last and "the driver needs the cluster's token" in last
    assert not (tmp_path / "results" / "rl_ladder.jsonl").exists()


def test_every_condition_and_a_new_stage_give_the_local_engines_rows(
    cluster, tmp_path, monkeypatch
):
    """Every stage chain of the condition table on rung 1 (a condition that only scales another's
    config values, sft_grpo_tuned and sft_grpo_lr0, runs the same code: one per chain keeps the
    suite's slowest test from growing with each arm), `star_resample` included: its stage `resample`
    (tests/new_stage: RFT on STaR's adapter, a parent other than SFT) is added to the stage table
    and the conditions alone — here by monkeypatch, in the drivers, nodes and kernels by a
    sitecustomize on their PYTHONPATH. Planned, run on the two nodes side by side (the cells that
    continue the gold SFT after the sft cell, reusing its shipped artifact) and reported: every
    planned row once, naming the adapter of its cell's last stage, equal to the local engine's
    for the same plan; a rerun skips every cell."""
    from new_stage import resample_stage

    resample_stage.register(monkeypatch.setitem)
    chains = {}
    for name, c in ladder.CONDITIONS.items():
        chains.setdefault(c.stages, name)  # the first condition of each stage chain
    conditions = tuple(chains.values())
    assert "sft_grpo" in conditions and "sft_grpo_lr0" not in conditions
    sets = {**SETS, "resample": SAMPLING}
    cfg = dataclasses.replace(_cfg(tmp_path, conditions), sets=sets)
    planned = {c.key for c in ladder.plan(cfg)}
    env = {**os.environ, "PYTHONPATH": NEW_STAGE}
    run = ("1", 0, ",".join(conditions))
    d = tmp_path / "ray"
    t0 = time.monotonic()
    out = _finish(_driver(d, *run, address=cluster.address, sets=sets, env=env), d)
    wall_ray = time.monotonic() - t0
    results = d / "results"
    rows = read_rows(results / "rl_ladder.jsonl")
    _one_row_set_each(results, planned)
    by_cond = {r["condition"]: r["cell_key"] for r in rows}
    st = {
        c: json.loads((results / "cells" / k / "status.json").read_text())
        for c, k in by_cond.items()
    }
    assert {s["status"] for s in st.values()} == {"done"}, out
    assert len({s["node"] for s in st.values()}) == 2  # side by side, on both nodes
    for s in st.values():  # the start line names the node and the log there
        assert f"{s['cell']} ({s['key']}): running on " in out and s["log"] in out, out
        d_cell = results / "cells" / s["key"]  # the cell's record came back
        assert {"30_training.ipynb", "log.txt", "status.json"} <= {p.name for p in d_cell.iterdir()}
    sft_art = Path(next(r for r in rows if r["condition"] == "sft")["adapter"]).name
    for c in (c for c in conditions if ladder.CONDITIONS[c].shares):
        log = (results / "cells" / st[c]["key"] / "log.txt").read_text()
        assert re.search(rf"reusing \S+/{sft_art} ", log), log  # the sft cell's, shipped
    assert (d / "artifacts" / sft_art / "COMPLETE").is_file()
    for r in rows:  # the adapter evaluated: its cell's last stage's (`adapter_of`)
        last = ladder.CONDITIONS[r["condition"]].last
        want = Path(r["ladder"]["artifacts"][last]).name if last else ""
        assert Path(r["adapter"] or "").name == want, r["condition"]

    d_local = tmp_path / "local"
    t0 = time.monotonic()
    _finish(_driver(d_local, *run, engine="local", sets=sets, env=env), d_local)
    wall_local = time.monotonic() - t0
    print(f"\n{len(planned)} cells: --engine ray {wall_ray:.0f} s, local {wall_local:.0f} s")
    ours = {r["tag"]: _comparable(r) for r in rows}
    theirs = {r["tag"]: _comparable(r) for r in read_rows(d_local / "results/rl_ladder.jsonl")}
    assert ours == theirs
    star = next(r for r in rows if r["condition"] == "star")
    assert Path(star["adapter"]).name.startswith("star1-") and star["ladder"]["star"]["rounds"] == 1
    resampled = next(r for r in rows if r["condition"] == "star_resample")
    assert Path(resampled["adapter"]).name.startswith("star_resample-")
    text, _ = ladder.show(results, figures_dir=None, check_figures=False)
    assert all(c in text for c in conditions), text

    out = _finish(_driver(d, *run, address=cluster.address, sets=sets, env=env), d)
    assert f"{len(planned)} cells, 0 run, {len(planned)} skipped" in out
    assert len(read_rows(results / "rl_ladder.jsonl")) == 2 * len(planned)


def test_a_killed_driver_is_resumed_by_rerunning_it(cluster, tmp_path):
    """SIGKILL the driver while its two cells run: Ray ends their workers (and with them the
    papermill runs), the cells show as interrupted, and the same command then runs both once."""
    d = tmp_path / "run"
    proc = _driver(d, "1,3", 11, address=cluster.address)
    running = _wait_running(d / "results", 2, proc)
    _wait_cell_procs(running, proc)
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(_cell_procs(s["key"]) for s in running):
        time.sleep(0.5)
    assert not [_cell_procs(s["key"]) for s in running if _cell_procs(s["key"])]
    assert not (d / "results" / "rl_ladder.jsonl").exists()
    assert sorted(ladder.interrupted_cells(d / "results")) == sorted(s["cell"] for s in running)
    _finish(_driver(d, "1,3", 11, address=cluster.address), d)
    _one_row_set_each(d / "results", {s["key"] for s in running})


def test_a_killed_worker_process_and_a_dead_node_are_retried(cluster, tmp_path):
    """Two cells, one per node: SIGKILL the head's cell worker process and the worker node's
    raylet mid-cell. Both cells run again (attempt 2, on the head: the worker node is gone),
    finish, and leave exactly one row set each; nothing of the killed attempts keeps running."""
    d = tmp_path / "run"
    proc = _driver(d, "1,3", 12, address=cluster.address)
    running = _wait_running(d / "results", 2, proc)
    worker = cluster.nodes["worker"]
    on_worker = [s for s in running if s["log"].startswith(str(worker.scratch))]
    on_head = [s for s in running if s not in on_worker]
    assert len(on_worker) == len(on_head) == 1, running
    _wait_cell_procs(running, proc)  # papermill is working on both
    os.kill(on_head[0]["pid"], signal.SIGKILL)
    cluster.kill_raylet("worker")
    out = _finish(proc, d)
    done = {s["key"]: s for s in _statuses(d / "results")}
    for s in running:
        assert done[s["key"]]["status"] == "done" and done[s["key"]]["attempts"] == 2, done
        assert done[s["key"]]["log"] != s["log"]  # a fresh attempt
        assert not _cell_procs(str(Path(s["log"]).parents[3]))  # the killed attempt's papermill
    _one_row_set_each(d / "results", set(done))
    assert worker.pids() == []  # the dead node's processes all ended
    assert out.count("running again (attempt 2)") == 2, out
    assert rows_by_key(d / "results" / "rl_ladder.jsonl").keys() == done.keys()
