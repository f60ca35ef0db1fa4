"""Reward throughput: the fork server against the plain `jac run` subprocess path, side by side.

Scores one fixed set of completions (gold, broken mutants, looping) for the harness drivers with
both backends, interleaved in rounds so background load hits both alike, and prints both rates,
the ratio and the verdict agreement (compiled, ran, exit code, stdout).

    .venv/bin/python bench/reward_throughput.py [--rounds 2] [--timeout 5] [--concurrency 1]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jacrl.drivers import parse_driver  # noqa: E402
from jacrl.executor import Executor, run_subprocess  # noqa: E402
from jacrl.extract import extract_body, splice  # noqa: E402

MUTATIONS = [(r"\+=", "-="), (r"<=", "<"), (r" > ", " >= "), (r"\bTrue\b", "False"),
             (r"\bappend\b", "apend"), (r";", "", 1), (r"\b1\b", "2"), (r"\}", "", 1),
             (r"\bself\.", "", 1), (r"\breturn\b", "print", 1), (r"\bif\b", "while", 1),
             (r"\bhere\b", "root"), (r"\(", "[", 1)]


def completions() -> list[tuple[str, str, str]]:
    """(driver id, kind, spliced program) for the fixed benchmark set."""
    out = []
    for path in sorted((ROOT / "drivers").glob("*_harness_*.jac")):
        d = parse_driver(path)
        gold = extract_body(f"```jac\n{d.gold}\n```", d.unit)
        bodies = [("gold", gold)]
        lines = gold.split("\n")
        for i in range(len(lines)):  # drop one line at a time
            bodies.append(("drop_line", "\n".join(lines[:i] + lines[i + 1:])))
        for m in MUTATIONS:
            mutated = re.sub(m[0], m[1], gold, count=m[2] if len(m) > 2 else 0)
            if mutated != gold:
                bodies.append(("mutant", mutated))
        bodies.append(("garbage", "@@@ not jac {"))
        if d.id.startswith(("syn", "osp_harness_tally")):
            bodies.append(("loop", "while True { }"))
        seen = set()
        for kind, body in bodies:
            program = splice(d.template, body)
            if program not in seen:
                seen.add(program)
                out.append((d.id, kind, program))
    return out


def verdict_key(v) -> tuple:
    return (v.compiled, v.ran, v.exit_code if not v.timed_out else None, v.stdout, v.timed_out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=5.0)
    ap.add_argument("--concurrency", type=int, default=1, help="fork-server slots")
    args = ap.parse_args()
    jobs = completions()
    programs = [p for _, _, p in jobs]
    kinds = {}
    for _, k, _ in jobs:
        kinds[k] = kinds.get(k, 0) + 1
    print(f"{len(jobs)} completions over {len({i for i, _, _ in jobs})} drivers: {kinds}; "
          f"timeout {args.timeout} s; fork concurrency {args.concurrency}; subprocess serial")
    fork_t, sub_t, agree, total = [], [], 0, 0
    fork_job_s, sub_job_s = [], []
    t0 = time.perf_counter()
    with Executor(concurrency=args.concurrency, cache_size=0) as ex:
        ex.run("with entry { print(1); }")  # server start-up is not part of the rate
        for r in range(args.rounds):
            a = time.perf_counter()
            fork = ex.run_many(programs, timeout=args.timeout)
            fork_t.append(time.perf_counter() - a)
            a = time.perf_counter()
            sub = [run_subprocess(p, timeout=args.timeout) for p in programs]
            sub_t.append(time.perf_counter() - a)
            agree += sum(verdict_key(f) == verdict_key(s) for f, s in zip(fork, sub))
            total += len(programs)
            fork_job_s += [v.seconds for v in fork]
            sub_job_s += [v.seconds for v in sub]
            for (tid, kind, _), f, s in zip(jobs, fork, sub):
                if verdict_key(f) != verdict_key(s):
                    print(f"  disagree: {tid}/{kind}: fork {verdict_key(f)[:3]} "
                          f"sub {verdict_key(s)[:3]}")
            print(f"round {r + 1}: fork {fork_t[-1]:.1f} s, subprocess {sub_t[-1]:.1f} s")
    n = len(programs)
    fork_rate, sub_rate = n / statistics.mean(fork_t), n / statistics.mean(sub_t)
    loops = [i for i, (_, k, _) in enumerate(jobs) if k == "loop"]
    print(f"fork server : {fork_rate:7.2f} completions/s  (median job {1000 * statistics.median(fork_job_s):.0f} ms)")
    print(f"subprocess  : {sub_rate:7.2f} completions/s  (median job {1000 * statistics.median(sub_job_s):.0f} ms)")
    print(f"ratio       : {fork_rate / sub_rate:7.1f}x  (all {n}, {len(loops)} of them looping to the timeout)")
    non_loop = [i for i in range(len(jobs)) if i not in loops]
    per_fork = [fork_job_s[r * n + i] for r in range(args.rounds) for i in non_loop]
    per_sub = [sub_job_s[r * n + i] for r in range(args.rounds) for i in non_loop]
    print(f"ratio w/o loops (summed job seconds): {sum(per_sub) / sum(per_fork):.1f}x")
    print(f"agreement   : {agree}/{total} verdicts identical ({100 * agree / total:.1f} %)")
    print(f"wall        : {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
