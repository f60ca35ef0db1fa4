"""Wall time of the same 4-cell ladder plan under `--engine local` and `--engine ray`, side by side.

The plan: rung 1 × jac-tiny × base, sft, sft_grpo, raw_grpo, with tiny iterations (3 SFT, 2 GRPO),
2 gen and 2 mem tasks, n = 2, 16 tokens — the cells are short, so what is measured is mostly the
engines' own overhead (papermill kernels, Ray start-up, shipping data and artifacts). Each engine
runs the plan the way a user runs it (`jacrl ladder run ...` in a fresh process, fresh results and
artifacts folders), `--rounds` times, interleaved:

* local: cells one after another (the default engine);
* ray, 2 nodes: a head and a worker node on loopback, each its own process group, working folder
  and project (`tests/ray_cluster.py`, as the tests start it), joined with `--address`;
* ray, no address: `jacrl` starts a local Ray instance for the run.

    .venv/bin/python bench/ladder_engines.py [--rounds 2]

Prints one line per run with the load average at its end.
"""

from __future__ import annotations

import argparse
import os
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from ray_cluster import Cluster, node_project  # noqa: E402  (the tests' cluster, reused)
from tiny_ladder import tiny_ladder_args  # noqa: E402  (the tests' tiny ladder)

from jacrl.notebooks import QUICK_SETS  # noqa: E402


def plan_argv(out: Path) -> list[str]:
    quick = {stage: QUICK_SETS[stage] for stage in ("sft", "grpo")}
    return tiny_ladder_args(
        out, "1", "base,sft,sft_grpo,raw_grpo", mem_limit=2, iters="sft=3,grpo=2", sets=quick
    )


def timed_run(name: str, out: Path, engine: str, address: str | None, env: dict) -> float:
    argv = [
        sys.executable,
        "-m",
        "jacrl.cli",
        "ladder",
        "run",
        "--engine",
        engine,
        *plan_argv(out),
        *(("--address", address) if address else ()),
    ]
    t = time.monotonic()
    p = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, env=env)
    wall = time.monotonic() - t
    ok = p.returncode == 0 and "4 cells, 4 run" in p.stdout + p.stderr
    print(f"{name:14s} {wall:6.1f} s  ok={ok}  load average {os.getloadavg()[0]:.2f}", flush=True)
    if not ok:
        print(p.stderr[-2000:], flush=True)
    return wall


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="jacrl-bench-engines-"))
    # a local instance needs its own token: never the user's ~/.ray
    own = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    own.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32))
    print(f"load average at start {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores", flush=True)
    cluster = Cluster()
    try:
        t = time.monotonic()
        cluster.start_node("head", node_project(base / "head"), head=True)
        cluster.start_node("worker", node_project(base / "worker"))
        print(
            f"cluster start  {time.monotonic() - t:6.1f} s  PSS {cluster.pss_kb() // 1024} MB",
            flush=True,
        )
        joined = {**os.environ, **cluster.auth}
        walls: dict[str, list[float]] = {"local": [], "ray 2 nodes": [], "ray no address": []}
        for i in range(args.rounds):
            walls["local"].append(
                timed_run("local", base / f"local{i}", "local", None, dict(os.environ))
            )
            walls["ray 2 nodes"].append(
                timed_run("ray 2 nodes", base / f"ray2{i}", "ray", cluster.address, joined)
            )
            walls["ray no address"].append(
                timed_run("ray no address", base / f"rayl{i}", "ray", None, own)
            )
        ref = min(walls["local"])
        for name, ws in walls.items():
            print(f"best {name:14s} {min(ws):6.1f} s  ({min(ws) / ref:.2f}x local)")
    finally:
        print("processes left:", cluster.stop())


if __name__ == "__main__":
    main()
