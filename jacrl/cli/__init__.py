"""`jacrl <verb>`: a thin argparse shell over the library's functions.

The project (drivers/, data/, models/, results/, ...) is `--root DIR`, else JACRL_ROOT, else the
nearest folder holding jacrl.toml above the working directory (`jacrl.project`). Expected errors
(a bad argument, a missing file or model, a corrupt JSONL line) print one line,
`jacrl: <verb>: <message>`, and exit 2; `--debug` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from importlib.metadata import PackageNotFoundError, version

from jacrl.models import ModelError
from jacrl.project import ROOT_ENV, ProjectNotFound, find_root, path_or
from jacrl.sandbox import SandboxUnavailable

# what a user can get wrong; anything else is a bug and keeps its traceback
EXPECTED = (ValueError, KeyError, FileNotFoundError, IsADirectoryError, NotADirectoryError,
            ProjectNotFound, ModelError, SandboxUnavailable)
MLX_VERBS = ("tiny-model", "train", "eval", "generate", "ladder", "demo")


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; every option's default shown unless its help already names it."""

    def _get_help_string(self, action):
        help = action.help or ""
        return help if "default" in help else super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """Subparsers inherit the class: the help formatter everywhere, and usage errors in one line."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        verb = self.prog.removeprefix("jacrl").strip()
        print(f"jacrl: {verb + ': ' if verb else ''}{message} (see {self.prog} --help)",
              file=sys.stderr)
        raise SystemExit(2)


def one_line(e: BaseException) -> str:
    """The message of an expected error, on one line."""
    if isinstance(e, OSError) and e.filename:
        return f"{e.filename}: {e.strerror}"
    if isinstance(e, SystemExit):
        msg = str(e.code)
    elif isinstance(e, KeyError) and e.args:
        msg = str(e.args[0])  # str(KeyError) would add quotes
    else:
        msg = str(e) or type(e).__name__
    return "; ".join(line.strip() for line in msg.splitlines() if line.strip())


def _version() -> str:
    try:
        return version("jacrl")
    except PackageNotFoundError:  # a bare checkout on sys.path, never installed
        return "unknown (not installed)"


# -------------------------------------------------------------------------------------------
# verbs
# -------------------------------------------------------------------------------------------


def _build_tasks(args: argparse.Namespace) -> int:
    from jacrl.tasks import build_tasks

    out = path_or(args.out, "data")
    report = build_tasks(args.drivers, out, progress=True)
    for line in report.failures:
        print(line, file=sys.stderr)
    if report.failures:
        print(f"build failed: {len(report.failures)} driver(s) rejected, nothing written",
              file=sys.stderr)
        return 1
    print(f"built {len(report.built)} tasks -> {out}/tasks.jsonl in {report.seconds:.1f} s")
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

    path = path_or(args.tasks, "tasks")
    tasks = {t["meta"]["id"]: t for t in read_tasks(path)}
    if args.id not in tasks:
        raise ValueError(f"{path}: no task {args.id!r}")
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

    df = inventory(args.tree, progress=True)
    print(df.groupby("kind").agg(units=("name", "size"), lines=("lines", "sum")).to_string())
    if args.drafts:
        paths = write_drafts(candidates(args.tree, progress=True), args.drafts)
        print(f"{len(paths)} draft drivers -> {args.drafts}")
    return 0


# -------------------------------------------------------------------------------------------
# the parser
# -------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="jacrl", description=__doc__)
    ap.add_argument("--version", action="version", version=f"jacrl {_version()}")
    ap.add_argument("--root", default=None, metavar="DIR",
                    help=f"the project folder (sets {ROOT_ENV} for this process and the ladder's "
                         f"cells; default: {ROOT_ENV}, else the nearest folder with jacrl.toml "
                         "above the working directory)")
    ap.add_argument("--allow-unsandboxed", action="store_true",
                    help="run model-written code even where no sandbox is available (it can then "
                         "read and write your files; same as JACRL_ALLOW_UNSANDBOXED=1)")
    ap.add_argument("--debug", action="store_true",
                    help="show the Python traceback of an error instead of its one-line message")
    sub = ap.add_subparsers(dest="verb", required=True, metavar="VERB")

    p = sub.add_parser("build-tasks", help="validate drivers/ and write data/tasks.jsonl")
    p.add_argument("--drivers", default=None, help="the Jac drivers folder (default: the "
                   "project's drivers/)")
    p.add_argument("--out", default=None, help="where tasks.jsonl and templates/ go (default: "
                   "the project's data/)")
    p.set_defaults(func=_build_tasks)

    p = sub.add_parser("split", help="holdout / trainpool / valid -> data/splits/")
    p.add_argument("--data", default=None, help="the data dir with tasks.jsonl; splits/ is "
                   "written in it (default: the project's data/)")
    p.add_argument("--holdout-min", type=int, default=40, help="held-out tasks, at least")
    p.add_argument("--valid-n", type=int, default=6, help="pool tail kept for validation")
    p.add_argument("--seed", type=int, default=0, help="orders sources before the greedy holdout")
    p.set_defaults(func=_split)

    p = sub.add_parser("rung", help="list the training tasks of rung N")
    p.add_argument("n", help="1 .. the train pool's size, or all (the ladder's: 1, 3, 5, 10, 20, "
                             "all)")
    p.add_argument("--data", default=None, help="the data dir with splits/ (default: the "
                   "project's data/)")
    p.set_defaults(func=_rung)

    p = sub.add_parser("mine", help="inventory a .jac tree; --drafts DIR writes hole candidates")
    p.add_argument("tree", nargs="?", default=None, help="default: jaclang's bundled sources")
    p.add_argument("--drafts", default=None, help="write draft drivers here (default: none "
                   "written)")
    p.set_defaults(func=_mine)

    p = sub.add_parser("run", help="run one .jac file in the isolated executor")
    p.add_argument("file", help="the .jac program")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds before the run is killed")
    p.add_argument("--subprocess", action="store_true", help="plain `jac run` backend")
    p.set_defaults(func=_run)

    p = sub.add_parser("score", help="score a completion against a task")
    p.add_argument("id", help="the task id")
    p.add_argument("completion", help="file with the completion text, or - for stdin")
    p.add_argument("--tasks", default=None, help="the tasks.jsonl holding the id (default: the "
                   "project's data/tasks.jsonl)")
    p.add_argument("--formula", default="tiered", choices=["tiered", "additive"],
                   help="reward formula")
    p.set_defaults(func=_score)

    from jacrl import evaluate, ladder, models, train

    models.add_arguments(sub.add_parser("tiny-model", help="rebuild the embedded jac-tiny model"))
    train.add_cli(sub)
    evaluate.add_cli(sub)
    ladder.add_cli(sub)
    return ap


def _verb(args: argparse.Namespace) -> str:
    return " ".join(v for v in (args.verb, getattr(args, "ladder_verb", None)) if v)


def main(argv: list[str] | None = None) -> int:
    """The `jacrl` command. argv None: this process's arguments (then, for MLX verbs on Linux, the
    process re-execs itself once with OpenBLAS preloaded)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help, --version, or a usage error already printed in one line
        return e.code if isinstance(e.code, int) else 2
    try:
        if args.root is not None:  # cells, papermill and re-execs inherit the environment
            os.environ[ROOT_ENV] = str(find_root(args.root))
        if args.allow_unsandboxed:
            os.environ["JACRL_ALLOW_UNSANDBOXED"] = "1"
        if argv is None and args.verb in MLX_VERBS:
            from jacrl.models import ensure_fast_blas

            ensure_fast_blas()  # Linux: re-exec with OpenBLAS preloaded (only at process start)
        return args.func(args)
    except (*EXPECTED, SystemExit) as e:
        if args.debug or (isinstance(e, SystemExit) and not isinstance(e.code, str)):
            raise
        print(f"jacrl: {_verb(args)}: {one_line(e)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
