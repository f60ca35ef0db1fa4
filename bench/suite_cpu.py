"""Where the test suite's CPU goes. Runs pytest the way `make test` does (two workers, whole files,
longest first), samples every process it starts from /proc, and charges each process's CPU to a
part of the house and to the test that started it. On the 2-core machine the suite is CPU-bound,
so its wall time is about the busy core-seconds over 2: this says which parts a shorter suite must
do less of.

Parts: notebook kernels; executor servers' start-up (the bubblewrap launcher, the collector and
the zygote's import and warm-up of jaclang) apart from their jobs (every process forked from a
zygote, and the CPU of jobs too short to be sampled, which reaches the zygote when it reaps them);
papermill; Ray's own processes; `jac run` subprocesses; the pytest workers themselves (the tests
that run in-process: they cannot be split by test); the rest. A process belongs to the test named
by PYTEST_CURRENT_TEST in its environment or its nearest ancestor's (processes a bubblewrap
sandbox or Ray started with a fresh environment stay unattributed).

And how long each test held its worker (pytest's JUnit report: setup + call + teardown), per test
and per file, with the share of the longest ten: what a shorter suite would have to cut.

usage: python bench/suite_cpu.py [--out bench/results/suite_cpu.json] [-- pytest args]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from jacrl.blas import cpus  # noqa: E402
from jacrl.provenance import git_commit  # noqa: E402

PYTEST = [
    "-q",
    "-n",
    "2",
    "--dist",
    "loadfile",
    "--no-loadscope-reorder",
    "-p",
    "no:cacheprovider",
]  # the Makefile's, without --durations
TICK = os.sysconf("SC_CLK_TCK")
POLL_S = 0.2
TOP_TESTS = 10  # the longest tests, named in the output with their share of the workers' time
SERVER = "executor/server.py"
KERNEL = "ipykernel_launcher"
PARTS = (
    ("kernel", (KERNEL,)),
    ("papermill", ("jacrl.papermill_main",)),
    ("executor start-up", ("executor/sandbox.py", "bwrap")),
    ("ray", ("/ray/", "raylet", "gcs_server", "bin/ray ")),
    ("jac subprocess", ("bin/jac ",)),
    ("pytest workers", ("exec(eval(sys.stdin",)),
    ("ladder CLI", ("jacrl.cli",)),
)


def busy_seconds() -> float:
    """Core-seconds the machine has spent busy since boot (all CPUs, /proc/stat)."""
    v = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(v) - v[3] - v[4]) / TICK


def speed_loop() -> float:
    """Seconds of a fixed pure-Python loop in a fresh process: the host's speed right now (these
    machines swing ~1.5x within an hour)."""
    code = (
        "import time\nt=time.process_time()\ni=0\nwhile i<20_000_000: i+=1\n"
        "print(time.process_time()-t)"
    )
    return float(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )


class Sampler:
    """Every process that appears after it starts: ppid, command line, the test in its
    environment, its own CPU and its reaped children's, as last seen."""

    def __init__(self):
        self.before = {p for p in os.listdir("/proc") if p.isdigit()}
        self.procs: dict[str, dict] = {}

    def poll(self) -> None:
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or pid in self.before:
                continue
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                f = stat[stat.rindex(")") + 2 :].split()
                seen = self.procs.get(pid)
                if seen is None:
                    seen = self.procs[pid] = {
                        "ppid": f[1],
                        "cmd": _cmdline(pid, stat),
                        "test": _test_of(pid),
                    }
                seen["self"] = (int(f[11]) + int(f[12])) / TICK
                seen["children"] = (int(f[13]) + int(f[14])) / TICK
            except (OSError, ValueError, IndexError):  # it ended meanwhile
                continue


def _cmdline(pid: str, stat: str) -> str:
    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    return cmd.strip() or stat[stat.index("(") + 1 : stat.rindex(")")]


def _test_of(pid: str) -> str:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return ""
    for kv in env:
        if kv.startswith(b"PYTEST_CURRENT_TEST="):
            return kv.split(b"=", 1)[1].decode(errors="replace").rsplit(" (", 1)[0]
    return ""


def is_server(cmd: str) -> bool:
    """An executor server process (collector, zygote, or a job's shim, init or job before its
    program runs): Python running server.py (bubblewrap's own command line names it too)."""
    words = cmd.split()
    script = next((w for w in words[1:] if w.endswith(".py")), "")
    return bool(words) and Path(words[0]).name.startswith("python") and script.endswith(SERVER)


def _lineage(procs: dict[str, dict], pid: str):
    """The sampled process and its sampled ancestors, nearest first."""
    for _ in range(64):  # a bound: a pid reused by a later process cannot make a loop
        p = procs.get(pid)
        if p is None:
            return
        yield p
        pid = p["ppid"]


def charge(procs: dict[str, dict]) -> tuple[collections.Counter, collections.Counter, int]:
    """(core-seconds per part, per test, executor servers). Counting the executor server
    processes in a lineage: 1 is a collector (the server's first process), 2 its zygote (both
    start-up), more is what a zygote forks, a job's processes whatever their command line says; a
    zygote's reaped children that were never sampled are jobs too."""
    kids = collections.defaultdict(list)
    for pid, p in procs.items():
        kids[p["ppid"]].append(pid)

    def test(pid: str) -> str:
        return next((p["test"] for p in _lineage(procs, pid) if p["test"]), "(unattributed)")

    parts, tests, servers = collections.Counter(), collections.Counter(), 0
    for pid, p in procs.items():
        cpu, server = p.get("self", 0.0), is_server(p["cmd"])
        n = sum(is_server(q["cmd"]) for q in _lineage(procs, pid))
        if server and n <= 2:
            part = "executor start-up"
        elif n >= 2:
            part = "executor jobs"
        else:
            part = next(
                (name for name, marks in PARTS if any(m in p["cmd"] for m in marks)), "other"
            )
        if server and n == 2:  # a zygote, and the jobs it reaped before they were sampled
            servers += 1
            seen = sum(procs[k].get("self", 0) + procs[k].get("children", 0) for k in kids[pid])
            unseen = max(0.0, p.get("children", 0.0) - seen)
            parts["executor jobs"] += unseen
            tests[test(pid)] += unseen
        parts[part] += cpu
        if part != "pytest workers":
            tests[test(pid)] += cpu
    return parts, tests, servers


def wall_by_test(junit: Path) -> collections.Counter:
    """Seconds per test (setup + call + teardown, as pytest's junit report counts them) from the
    run's JUnit XML: how long it held its worker. Parametrized cases are summed under their
    function's name."""
    out = collections.Counter()
    for case in ET.parse(junit).iter("testcase"):
        path = case.get("classname", "").replace(".", "/") + ".py"
        out[f"{path}::{case.get('name', '').split('[')[0]}"] += float(case.get("time", 0.0))
    return out


def run_sampled(pytest_args: list[str], sampler: Sampler) -> tuple[int, collections.Counter]:
    """pytest's exit code and its seconds per test, with every process sampled meanwhile."""
    with tempfile.TemporaryDirectory(prefix="suite-cpu-") as tmp:
        junit = Path(tmp) / "junit.xml"
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", *pytest_args, f"--junitxml={junit}"], cwd=ROOT
        )
        while proc.poll() is None:
            sampler.poll()
            time.sleep(POLL_S)
        return proc.returncode, (wall_by_test(junit) if junit.is_file() else collections.Counter())


def main() -> int:
    ap = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "suite_cpu.json"))
    ap.add_argument("pytest_args", nargs="*", help="after --: pytest's (default: make test's)")
    args = ap.parse_args()
    load, speed = os.getloadavg(), speed_loop()
    sampler = Sampler()
    b0, t0 = busy_seconds(), time.monotonic()
    code, held = run_sampled(args.pytest_args or PYTEST, sampler)
    wall, busy = time.monotonic() - t0, busy_seconds() - b0
    files = collections.Counter()
    for name, s in held.items():
        files[name.split("::")[0]] += s
    held_s = sum(held.values())
    top_share = sum(s for _, s in held.most_common(TOP_TESTS)) / held_s if held_s else 0.0
    parts, tests, servers = charge(sampler.procs)
    parts["not sampled (short-lived, or outside the suite)"] = max(0.0, busy - sum(parts.values()))
    out = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "commit": git_commit(ROOT)[:7],
        "cpus": cpus(),
        "load_avg_at_start": [round(x, 2) for x in load],
        "speed_loop_s": round(speed, 2),
        "pytest_exit": code,
        "wall_s": round(wall, 1),
        "busy_core_s": round(busy, 1),
        "busy_share": round(busy / wall / cpus(), 3),
        "kernels": sum(KERNEL in p["cmd"] for p in sampler.procs.values()),
        "executor_servers": servers,
        "parts_core_s": {k: round(v, 1) for k, v in parts.most_common()},
        "tests_core_s": {k: round(v, 1) for k, v in tests.most_common(30)},
        "worker_s": round(held_s, 1),
        f"top_{TOP_TESTS}_tests_share_of_worker_s": round(top_share, 3),
        "files_worker_s": {k: round(v, 1) for k, v in files.most_common()},
        "tests_worker_s": {k: round(v, 1) for k, v in held.most_common(30)},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(
        f"\nwall {wall:.0f} s, busy {busy:.0f} core-s ({out['busy_share']:.0%} of "
        f"{out['cpus']} cores), load {out['load_avg_at_start'][0]} at start, speed loop "
        f"{speed:.2f} s; {out['kernels']} kernels, {out['executor_servers']} executor servers"
    )
    for name, v in parts.most_common():
        print(f"{v:8.1f} core-s  {100 * v / busy:4.1f} %  {name}")
    print(
        f"workers held by tests: {held_s:.0f} s; the {TOP_TESTS} longest tests "
        f"{100 * top_share:.0f} %:"
    )
    for name, v in held.most_common(TOP_TESTS):
        print(f"{v:8.1f} s  {name}")
    print(f"written: {args.out}")
    return code


if __name__ == "__main__":
    sys.exit(main())
