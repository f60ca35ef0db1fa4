"""`jacrl <verb>`: a thin argparse shell over the library's functions."""

from __future__ import annotations

import argparse
import json
import sys

from jacrl.sandbox import SandboxUnavailable


def _build_tasks(args: argparse.Namespace) -> int:
    from jacrl.tasks import build_tasks

    report = build_tasks(args.drivers, args.out)
    for line in report.failures:
        print(line, file=sys.stderr)
    if report.failures:
        print(f"build failed: {len(report.failures)} driver(s) rejected, nothing written",
              file=sys.stderr)
        return 1
    print(f"built {len(report.built)} tasks -> {args.out}/tasks.jsonl in {report.seconds:.1f} s")
    return 0


def _run(args: argparse.Namespace) -> int:
    from jacrl.executor import Executor, run_subprocess

    source = open(args.file).read()
    if args.subprocess:
        verdict = run_subprocess(source, args.timeout)
    else:
        with Executor() as ex:
            verdict = ex.run(source, args.timeout)
    sys.stdout.write(verdict.stdout)
    sys.stderr.write(verdict.stderr)
    print(json.dumps({k: v for k, v in verdict.to_json().items() if k not in ("stdout", "stderr")}),
          file=sys.stderr)
    return 0 if verdict.ran else 1


def _score(args: argparse.Namespace) -> int:
    from jacrl.reward import score_completions
    from jacrl.tasks import read_tasks

    tasks = {t["meta"]["id"]: t for t in read_tasks(args.tasks)}
    if args.id not in tasks:
        print(f"{args.tasks}: no task {args.id!r}", file=sys.stderr)
        return 2
    completion = sys.stdin.read() if args.completion == "-" else open(args.completion).read()
    s = score_completions([completion], [tasks[args.id]["answer"]], formula=args.formula)[0]
    print(json.dumps({"id": s.task_id, "score": s.score, "tier": s.tier, "sim": round(s.sim, 4),
                      "line_match": round(s.line_match, 4), "body": s.body}, indent=1))
    return 0


def _split(args: argparse.Namespace) -> int:
    from jacrl.splits import SplitConfig, build_splits, report

    cfg = SplitConfig(holdout_min=args.holdout_min, valid_n=args.valid_n, seed=args.seed)
    print(report(build_splits(args.data, cfg)))
    return 0


def _rung(args: argparse.Namespace) -> int:
    from jacrl.splits import rung

    for t in rung(args.n, args.data):
        meta = json.loads(t["answer"])
        print(f"{meta['id']:45s} {meta['family']:5s} {meta['source']}")
    return 0


def _mine(args: argparse.Namespace) -> int:
    from jacrl.mining import candidates, inventory, write_drafts

    df = inventory(args.tree)
    print(df.groupby("kind").agg(units=("name", "size"), lines=("lines", "sum")).to_string())
    if args.drafts:
        paths = write_drafts(candidates(args.tree), args.drafts)
        print(f"{len(paths)} draft drivers -> {args.drafts}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="jacrl", description=__doc__)
    ap.add_argument("--allow-unsandboxed", action="store_true",
                    help="run model-written code even where no sandbox is available (it can then "
                         "read and write your files; same as JACRL_ALLOW_UNSANDBOXED=1)")
    sub = ap.add_subparsers(dest="verb", required=True)

    p = sub.add_parser("build-tasks", help="validate drivers/ and write data/tasks.jsonl")
    p.add_argument("--drivers", default="drivers")
    p.add_argument("--out", default="data")
    p.set_defaults(func=_build_tasks)

    p = sub.add_parser("split", help="holdout / trainpool / valid -> data/splits/")
    p.add_argument("--data", default="data")
    p.add_argument("--holdout-min", type=int, default=40)
    p.add_argument("--valid-n", type=int, default=6)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_split)

    p = sub.add_parser("rung", help="list the training tasks of rung N")
    p.add_argument("n", help="1, 3, 5, 10, 20 or all")
    p.add_argument("--data", default="data")
    p.set_defaults(func=_rung)

    p = sub.add_parser("mine", help="inventory a .jac tree; --drafts DIR writes hole candidates")
    p.add_argument("tree", nargs="?", default=None, help="default: jaclang's bundled sources")
    p.add_argument("--drafts", default=None)
    p.set_defaults(func=_mine)

    p = sub.add_parser("run", help="run one .jac file in the isolated executor")
    p.add_argument("file")
    p.add_argument("--timeout", type=float, default=20.0)
    p.add_argument("--subprocess", action="store_true", help="plain `jac run` backend")
    p.set_defaults(func=_run)

    p = sub.add_parser("score", help="score a completion against a task")
    p.add_argument("id")
    p.add_argument("completion", help="file with the completion text, or - for stdin")
    p.add_argument("--tasks", default="data/tasks.jsonl")
    p.add_argument("--formula", default="tiered", choices=["tiered", "additive"])
    p.set_defaults(func=_score)

    from jacrl import evaluate, ladder, models, train

    models.add_arguments(sub.add_parser("tiny-model", help="rebuild the embedded jac-tiny model"))
    train.add_cli(sub)
    evaluate.add_cli(sub)
    ladder.add_cli(sub)
    return ap


MLX_VERBS = ("tiny-model", "train", "eval", "generate", "ladder", "demo")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.allow_unsandboxed:  # the environment carries it to ladder cells and re-execs
        import os

        os.environ["JACRL_ALLOW_UNSANDBOXED"] = "1"
    if args.verb in MLX_VERBS:
        from jacrl.models import ensure_fast_blas

        ensure_fast_blas()  # Linux: re-exec with OpenBLAS preloaded (only works at process start)
    try:
        return args.func(args)
    except SandboxUnavailable as e:
        print(f"jacrl {args.verb}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
