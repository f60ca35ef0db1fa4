"""Mutation testing of the modules every number rests on (`make mutation`; docs/mutation.md).

mutmut (pinned in the Makefile) puts small, compiling bugs into each module named in
pyproject.toml's [tool.mutmut] `only_mutate` and runs, for each, the fast tests that called the
function it changed (mutmut records which test calls which function in one traced run of
`pytest_add_cli_args_test_selection`). A module with more than `--cap` mutants is scored on a
seeded sample of that many (the score says so). Mutants listed in bench/mutation_equivalent.txt
(one per line: name, then why it cannot be told apart) count as neither killed nor survived.
mutmut works in build/mutation/ (a copy of the project: editing it meanwhile changes nothing).

Writes bench/results/mutation.json and .txt: per module the mutants, the sample, killed (a test
failed, or it timed out), survived, and the score killed / (sample - equivalent), with the load
average and the commit. Usage: python bench/mutation.py [--modules stats,reward] [--cap 150]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "results"
EQUIVALENT = ROOT / "bench" / "mutation_equivalent.txt"
MUTMUT = str(Path(sys.executable).parent / "mutmut")
# mutmut runs in a copy of the project (so editing it meanwhile changes nothing) and mutates a
# copy of that in its mutants/ folder
WORK = ROOT / "build" / "mutation"
COPY = ("jacrl", "tests", "drivers", "data", "models", "results", "notebooks", "figures",
        "README.md", "jacrl.toml", "pyproject.toml")
LOG = WORK / "mutation.log"  # mutmut's own output
KILLED = ("killed", "timeout")  # a test failed, or the mutant never finished
PROBE = "jacrl.__mutation_list_only__"  # matches no mutant: generate them, run nothing


def modules() -> dict[str, str]:
    """{module: its file} of [tool.mutmut] only_mutate, in order ('report/seeds' -> file)."""
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    return {p.removeprefix("jacrl/").removesuffix(".py"): p for p in cfg["only_mutate"]}


def equivalents() -> dict[str, str]:
    out = {}
    for line in EQUIVALENT.read_text().splitlines() if EQUIVALENT.exists() else []:
        if line.strip() and not line.startswith("#"):
            name, _, why = line.partition(" ")
            out[name] = why.strip()
    return out


def mutmut(*args: str, log) -> int:
    return subprocess.run([MUTMUT, *args], cwd=WORK, stdout=log, stderr=subprocess.STDOUT,
                          env={**os.environ, "PYTHONHASHSEED": "0"}).returncode


def verdicts(path: str) -> dict[str, str]:
    """{mutant: status} from mutmut's record of one module."""
    from mutmut.stats import status_by_exit_code

    meta = WORK / "mutants" / f"{path}.meta"
    codes = json.loads(meta.read_text())["exit_code_by_key"] if meta.exists() else {}
    return {k: status_by_exit_code[v] for k, v in codes.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--modules", default="", help="comma list (default: all of only_mutate)")
    ap.add_argument("--cap", type=int, default=150, help="most mutants run per module")
    ap.add_argument("--seed", type=int, default=0, help="the sample's seed")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--retest", action="store_true",
                    help="rerun only the last run's mutants that were not killed (after new tests)")
    args = ap.parse_args(argv)
    mods = modules()
    chosen = [m.strip() for m in args.modules.split(",") if m.strip()] or list(mods)
    unknown = set(chosen) - set(mods)
    if unknown:
        sys.exit(f"bench/mutation.py: not in [tool.mutmut] only_mutate: {sorted(unknown)}")
    OUT.mkdir(parents=True, exist_ok=True)
    if not args.retest:
        shutil.rmtree(WORK, ignore_errors=True)
    skip = shutil.ignore_patterns("__pycache__", "*.lock", ".pytest_cache")
    for name in COPY:
        src, dst = ROOT / name, WORK / name
        if src.is_dir():
            shutil.copytree(src, dst, ignore=skip, dirs_exist_ok=True)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    equiv = equivalents()
    load0, t0 = os.getloadavg(), time.time()
    last = json.loads((OUT / "mutation.json").read_text()) if args.retest else {}
    with open(LOG, "a" if args.retest else "w") as log:
        if not args.retest:
            mutmut("run", "--max-children", str(args.jobs), PROBE, log=log)  # fails: none match
        results = {}
        for mod in chosen:
            names = sorted(verdicts(mods[mod]))
            if not names:
                sys.exit(f"bench/mutation.py: no mutants of {mod}; see {LOG}")
            sample = sorted(random.Random(f"{args.seed}:{mod}").sample(names, args.cap)) \
                if len(names) > args.cap else names
            t = time.time()
            before = verdicts(mods[mod])
            rerun = [n for n in sample if before[n] not in KILLED] if args.retest else sample
            if rerun:
                mutmut("run", "--max-children", str(args.jobs), *rerun, log=log)
            got = verdicts(mods[mod])
            status = {n: got[n] for n in sample}
            if all(s == "not checked" for s in status.values()):
                sys.exit(f"bench/mutation.py: mutmut checked no mutant of {mod}; see {LOG}")
            eq = sorted(n for n in sample if n in equiv and status[n] != "killed")
            killed = sum(s in KILLED for s in status.values())
            survivors = sorted(n for n, s in status.items() if s not in KILLED and n not in equiv)
            judged = len(sample) - len(eq)
            results[mod] = {
                "mutants": len(names), "sampled": len(sample), "killed": killed,
                "equivalent": len(eq), "survived": len(survivors),
                "score": round(killed / judged, 4) if judged else None,
                "seconds": round(time.time() - t, 1) + (
                    last["modules"][mod]["seconds"] if args.retest else 0),
                "retested": len(rerun) if args.retest else 0,
                "not_killed": {n: status[n] for n in survivors},
            }
            print(f"{mod:20s} {killed}/{judged} killed ({results[mod]['score']:.1%}) of "
                  f"{len(sample)} sampled from {len(names)}", flush=True)
    from jacrl.provenance import git_commit

    record = {
        "tool": f"mutmut {_version()}", "cap": args.cap, "seed": args.seed, "jobs": args.jobs,
        "commit": git_commit(), "cpus": os.cpu_count(), "seconds": round(time.time() - t0, 1),
        "load_before": [round(x, 2) for x in load0],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "modules": results,
    }
    if args.retest:  # the run whose survivors these are
        record["first_run"] = last.get("first_run") or {
            k: last[k] for k in ("commit", "seconds", "load_before", "load_after")}
    (OUT / "mutation.json").write_text(json.dumps(record, indent=1) + "\n")
    (OUT / "mutation.txt").write_text(table(record))
    print(table(record), end="")
    return 0


def _version() -> str:
    from importlib.metadata import version

    return version("mutmut")


def table(record: dict) -> str:
    """The per-module table (Markdown), as docs/mutation.md shows it."""
    lines = ["| module | mutants | run | killed | equivalent | survived | score |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for mod, r in record["modules"].items():
        run = f"{r['sampled']}" + (" (sample)" if r["sampled"] < r["mutants"] else "")
        lines.append(f"| {mod} | {r['mutants']} | {run} | {r['killed']} | {r['equivalent']} | "
                     f"{r['survived']} | {100 * r['score']:.1f} % |")
    lines.append(f"\n{record['tool']}, commit {record['commit']}, {record['jobs']} jobs on "
                 f"{record['cpus']} CPUs, {record['seconds']:.0f} s, load average "
                 f"{record['load_before'][0]} before / {record['load_after'][0]} after; sample "
                 f"cap {record['cap']} per module, seed {record['seed']}.")
    if "first_run" in record:
        f = record["first_run"]
        lines.append(f"The mutants not killed by the run at commit {f['commit']} "
                     f"({f['seconds']:.0f} s, load average {f['load_before'][0]} / "
                     f"{f['load_after'][0]}) were rerun here, after tests that kill them "
                     "were added.")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
