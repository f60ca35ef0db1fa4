"""Where a sandboxed reward job's CPU goes, part by part (issue 58's throughput bounds).

A process warmed as the fork server's zygote is (jaclang's compiler imported, the warm-up program
run: `jacrl/executor/warm.py`, loaded by path as the server loads it) forks children that each do
one part of a job, and the CPU each costs is read from the kernel (the child's rusage, the
parent's own times for what fork costs the forking side):

- `fork`: a fork whose child exits at once (the zygote forks the shim);
- `namespaces`: the shim's `enter_job_namespaces` (user, mount, pid, ipc and net namespaces, the
  private tmpfs mounts, /proc covered, capabilities dropped), then exit;
- `chain`: that and the shim's two forks, its init and the job, each exiting at once;
- `compile`: jaclang compiling a program to bytecode, as `jac run` does, without running it;
- `job`: the job proper, the program compiled and run (`child.run_like_cli`), stdout to /dev/null.

Programs: `bench/reward_throughput.py`'s set without the looping ones (per harness driver the gold
body, every drop-one-line variant and the garbage body); the mutants are left out, some of them
loop, and so are the programs still running after CHILD_LIMIT_S (three drop-one-line variants of
collatz, which loop for ever). Then the arithmetic of the bounds from
`bench/results/reward_throughput.json`: the CPU a job may cost for 20x with the looping programs
and 35x without them, beside what these parts add up to. Run on an idle machine (the load is
recorded):

    .venv/bin/python bench/job_cost.py [--json bench/results/job_cost.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import json
import os
import resource
import signal
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from docs_figures import recorded  # noqa: E402  (bench/, the script's own folder)
from reward_throughput import completions  # noqa: E402

EXECUTOR = ROOT / "jacrl" / "executor"
CHILD_LIMIT_S = 2  # a program still running then is left out (none of the set should be)


def _sibling(name: str):
    """An executor file loaded by path, as the fork server loads its siblings."""
    spec = importlib.util.spec_from_file_location(name, EXECUTOR / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _forked(part) -> tuple[float, bool]:
    """(child CPU s, ok) of one fork whose child runs `part()` and exits."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            signal.alarm(CHILD_LIMIT_S)
            part()
            code = 0
        finally:
            os._exit(code)
    _, status, usage = os.wait4(pid, 0)
    return usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status) == 0


def _part(parts: list) -> tuple[list, float]:
    """Each of `parts` forked in turn: (their (child CPU, ok)), the forking side's CPU per fork
    (clock ticks are too coarse for one fork: the loop's total over the forks)."""
    before = os.times()
    runs = [_forked(p) for p in parts]
    after = os.times()
    return runs, ((after.user - before.user) + (after.system - before.system)) / len(parts)


def _ms(xs: list[float]) -> float:
    return round(statistics.median(xs) * 1000, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--json", default=str(ROOT / "bench" / "results" / "job_cost.json"))
    args = ap.parse_args()

    programs = [j.program for j in completions() if j.kind in ("gold", "drop_line", "garbage")]
    child, warm = _sibling("child"), _sibling("warm")
    scratch = Path(tempfile.mkdtemp(prefix="job_cost_"))
    load_start = os.getloadavg()
    warm.import_compiler()
    warm.warm(str(scratch), child)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def enter() -> None:
        child.enter_job_namespaces(os.getuid(), os.getgid(), [])

    def chain() -> None:
        enter()
        for _ in range(2):  # the init, then the job (each a child of the one before)
            pid = os.fork()
            if pid:
                os.waitpid(pid, 0)
                return
        os._exit(0)

    def in_workdir(i: int) -> str:
        work = Path(tempfile.mkdtemp(dir=scratch))
        os.chdir(work)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        sys.stdout = sys.stderr = io.TextIOWrapper(io.FileIO(1, "w", closefd=False))
        return child._write_program(programs[i], str(work))

    def compile_only(i: int) -> None:
        from jaclang.jac0core.program import JacProgram

        JacProgram().compile(file_path=in_workdir(i))

    def job(i: int) -> None:
        child.run_like_cli(in_workdir(i), lambda _: None)
        sys.stdout.flush()

    n = len(programs)
    parts = {
        "fork": _part([lambda: None] * n),
        "namespaces": _part([enter] * n),
        "chain": _part([chain] * n),
        "compile": _part([lambda i=i: compile_only(i) for i in range(n)]),
        "job": _part([lambda i=i: job(i) for i in range(n)]),
    }
    ok = [all(runs[i][1] for runs, _ in parts.values()) for i in range(n)]
    cost = {
        name: {
            "child_ms": _ms([c for (c, _), keep in zip(runs, ok, strict=True) if keep]),
            "parent_ms": round(parent * 1000, 2),
        }
        for name, (runs, parent) in parts.items()
    }
    fork = cost["fork"]["child_ms"] + cost["fork"]["parent_ms"]  # the zygote's fork of the shim
    sandbox = cost["chain"]["child_ms"] - cost["fork"]["child_ms"]  # namespaces + 2 more forks
    per_job = fork + sandbox + cost["job"]["child_ms"]

    tp = json.loads((ROOT / "bench" / "results" / "reward_throughput.json").read_text())
    n, base = tp["n"], tp["batch_seconds"]
    cores = tp["cpus"]
    loop_cpu = n["looping"] * max(tp["timeout_s"])  # each looping program burns its limit
    budget = {
        "with_loops_20x_ms": round(
            (min(base["base_set"]) / 20 * cores - loop_cpu) / n["set_nl"] * 1000, 1
        ),
        "without_loops_35x_ms": round(
            min(base["base_set_nl"]) / 35 * cores / n["set_nl"] * 1000, 1
        ),
    }
    record = {
        "programs": len(programs),
        "measured": sum(ok),
        "warmed_rss_mb": round(rss_mb),
        "load_start": [round(x, 2) for x in load_start],
        "load_end": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "parts_ms": cost,
        "sum_ms": {
            "fork": round(fork, 2),
            "sandbox (namespaces + init + job forks)": round(sandbox, 2),
            "job (compile + run)": cost["job"]["child_ms"],
            "total": round(per_job, 2),
        },
        "bounds_budget_ms": budget,
        "from": "bench/results/reward_throughput.json (its baseline batches)",
    }
    out = Path(args.json)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))
    recorded(out)


if __name__ == "__main__":
    main()
