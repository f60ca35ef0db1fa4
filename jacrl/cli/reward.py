"""`jacrl run FILE` (one program in the isolated executor) and `jacrl score ID FILE` (one
completion graded against a task, with the reward's details)."""

from __future__ import annotations

import argparse
import json
import sys

from jacrl.executor import Executor, run_subprocess
from jacrl.project import path_or
from jacrl.ruler.reward import DEFAULT_FORMULA, FORMULAS, score_completions
from jacrl.tasks.record import read_tasks


def add(sub) -> None:
    p = sub.add_parser("run", help="run one .jac file in the sandbox the reward runs model code in")
    p.add_argument("file", help="the .jac program")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds before the run is killed")
    p.add_argument("--subprocess", action="store_true", help="plain `jac run` backend")
    p.set_defaults(func=run_file)

    p = sub.add_parser("score", help="score a completion against a task")
    p.add_argument("id", help="the task id")
    p.add_argument("completion", help="file with the completion text, or - for stdin")
    p.add_argument(
        "--tasks",
        default=None,
        help="the tasks.jsonl holding the id (default: the project's data/tasks.jsonl)",
    )
    p.add_argument(
        "--formula", default=DEFAULT_FORMULA, choices=list(FORMULAS), help="reward formula"
    )
    p.set_defaults(func=run_score)


def run_file(args: argparse.Namespace) -> int:
    """Print the program's stdout/stderr, then its verdict as JSON on stderr with the isolation
    level and syscall policy it ran under; exit 1 unless it ran."""
    with open(args.file) as fh:
        source = fh.read()
    where = {"isolation": "none (plain jac run)"}
    if args.subprocess:
        verdict = run_subprocess(source, args.timeout)
    else:
        with Executor() as ex:
            verdict = ex.run(source, args.timeout)
            where = {"isolation": ex.isolation, "syscall_policy": ex.syscall_policy}
    sys.stdout.write(verdict.stdout)
    sys.stderr.write(verdict.stderr)
    fields = {k: v for k, v in verdict.to_json().items() if k not in ("stdout", "stderr")}
    print(json.dumps({**fields, **where}), file=sys.stderr)
    return 0 if verdict.ran else 1


def run_score(args: argparse.Namespace) -> int:
    path = path_or(args.tasks, "tasks")
    tasks = {t["meta"]["id"]: t for t in read_tasks(path)}
    if args.id not in tasks:
        raise ValueError(f"{path}: no task {args.id!r}")
    if args.completion == "-":
        completion = sys.stdin.read()
    else:
        with open(args.completion) as fh:
            completion = fh.read()
    s = score_completions([completion], [tasks[args.id]["answer"]], formula=args.formula)[0]
    print(
        json.dumps(
            {
                "id": s.task_id,
                "score": s.score,
                "tier": s.tier,
                "reason": s.reason,
                "sim": round(s.sim, 4),
                "line_match": round(s.line_match, 4),
                "body": s.body,
            },
            indent=1,
        )
    )
    return 0
