"""`jacrl eval` (evaluate a model and append its row) and `jacrl generate` (verified best-of-k).
Sampling defaults are `jacrl.config.EvalConfig`'s."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from jacrl.config import EvalConfig
from jacrl.evaluate import check_k, evaluate
from jacrl.generate import BEST_OF, generate_best_of_k
from jacrl.models.registry import resolve
from jacrl.project import ProjectNotFound, path_or, project
from jacrl.results import append_row, format_row
from jacrl.samples import SUFFIX, default_path
from jacrl.tasks.record import meta, prompt_answer, read_tasks
from jacrl.tasks.splits import load_split

_KNOBS = {f.name: f for f in dataclasses.fields(EvalConfig)}


def _knob(p: argparse.ArgumentParser, flags: tuple[str, ...], name: str) -> None:
    """An option for an EvalConfig field: its type, default and help text."""
    f = _KNOBS[name]
    p.add_argument(
        *flags,
        dest=name,
        type=type(f.default),
        default=f.default,
        metavar=flags[-1].lstrip("-").upper().replace("-", "_"),
        help=f.metadata["help"],
    )


def int_list(s: str) -> list[int]:
    """'1,2,4' -> [1, 2, 4]."""
    try:
        return [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"-k expects comma-separated integers, got {s!r}") from None


def load_tasks_arg(
    tasks: str | None, split: str | None, data_dir: str | None
) -> tuple[list[dict], str]:
    """Tasks ({prompt, answer}) from --tasks FILE or --split NAME, and the row's split label."""
    if tasks:
        return [prompt_answer(t) for t in read_tasks(tasks)], Path(tasks).stem
    if split:
        return [prompt_answer(t) for t in load_split(split, data_dir=data_dir)], split
    raise ValueError("give --split NAME or --tasks FILE")


def _eval_out(out: str | None) -> str:
    """Where the row goes ("" = nowhere): the path given, else the project's eval rows; never
    the ladder's own rows, whose cells are keyed."""
    if out == "":
        return ""
    try:
        proj = project()
    except ProjectNotFound:
        if out is None:
            raise
        return out
    if out is not None and Path(out).resolve() == proj.rows.resolve():
        raise ValueError(
            f"--out {out} is the ladder's own rows file; eval rows go elsewhere "
            f"(default: {proj.rel(proj.eval_rows)})"
        )
    return out if out is not None else str(proj.eval_rows)


def add_eval_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--model", default="jac-tiny", help="registry name or MLX model dir")
    p.add_argument(
        "--adapter",
        default=None,
        help="LoRA adapter dir, e.g. an artifact dir (default: none, the base model)",
    )
    p.add_argument(
        "--split",
        default=None,
        help="split name from data/splits, e.g. holdout (default: none; give --split or --tasks)",
    )
    p.add_argument(
        "--tasks", default=None, help="a tasks.jsonl file instead of --split (default: none)"
    )
    p.add_argument(
        "--data",
        "--data-dir",
        dest="data_dir",
        default=None,
        help="the data dir (default: the project's data/)",
    )
    p.add_argument("--limit", type=int, default=0, help="first N tasks only (0 = all)")
    _knob(p, ("-n", "--samples"), "n")
    p.add_argument(
        "-k",
        default=None,
        help="pass@k values, comma-separated, each <= n (default: "
        f"those of {','.join(map(str, EvalConfig.k))} that are <= n)",
    )
    _knob(p, ("--temperature",), "temperature")
    _knob(p, ("--seed",), "seed")
    _knob(p, ("--max-tokens",), "max_tokens")
    _knob(p, ("--budget-factor",), "budget_factor")
    _knob(p, ("--batch-size",), "batch_size")
    _knob(p, ("--decode-workers",), "decode_workers")
    p.add_argument("--tag", default="", help="row label")
    p.add_argument("--kind", default="", help="row label, e.g. gen or mem")
    p.add_argument(
        "--out",
        default=None,
        help="results JSONL to append the row to (default: "
        "results/eval/eval.jsonl in the project, never the ladder's rows; '' = none)",
    )
    p.add_argument("--json", action="store_true", help="print the row as JSON too")
    p.add_argument(
        "--log-samples",
        nargs="?",
        const="",
        default=None,
        metavar="FILE",
        help="keep every completion (text, extracted body, tier, reward, truncated) "
        "in a gzip JSON-lines file beside the row, named in its `samples` field "
        "(FILE, else samples/<model>-<split>-<time>.jsonl.gz next to --out); browse "
        "it with `jacrl samples` (default: not kept)",
    )
    return p


def _samples_out(log_samples: str | None, out: str, model: str, split: str, kind: str):
    """Where --log-samples writes (None: nowhere): FILE, else samples/ beside the rows file
    (the project's eval rows folder when --out '')."""
    if log_samples is None:
        return None
    if log_samples:  # checked before the hours of work, not after
        if not log_samples.endswith(".gz"):
            raise ValueError(
                f"--log-samples {log_samples}: a samples file is gzip JSON lines: name it *{SUFFIX}"
            )
        return Path(log_samples)
    return default_path(Path(out).parent if out else project().eval_rows.parent, model, split, kind)


def run_eval(args: argparse.Namespace) -> int:
    """Evaluate a model (+ adapter) on a split or tasks file; print the row and append it."""
    if args.n < 0:
        raise ValueError(f"-n must be >= 0, got {args.n}")
    ks = check_k(int_list(args.k), args.n) if args.k is not None else EvalConfig(n=args.n).ks()
    out = _eval_out(args.out)
    resolve(args.model)  # an unknown model fails before any work
    tasks, split = load_tasks_arg(args.tasks, args.split, args.data_dir)
    if args.limit:
        tasks = tasks[: args.limit]
    cfg = EvalConfig(
        n=args.n,
        k=tuple(ks),
        temperature=args.temperature,
        seed=args.seed,
        max_tokens=args.max_tokens,
        budget_factor=args.budget_factor,
        batch_size=args.batch_size,
        decode_workers=args.decode_workers,
    )
    samples = _samples_out(args.log_samples, out, args.model, split, args.kind)
    row = evaluate(
        args.model,
        args.adapter,
        tasks,
        cfg,
        tag=args.tag,
        split=split,
        kind=args.kind,
        progress=True,
        samples=samples,
    )
    print(format_row(row))
    if samples:
        print(f"samples in {samples} (`jacrl samples {samples}`)")
    if args.json:
        print(json.dumps({k: v for k, v in row.items() if k != "per_task"}))
    if out:
        append_row(out, row)
        print(f"appended to {out}")
    return 0


def add_generate_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--model", default="jac-tiny", help="registry name or MLX model dir")
    p.add_argument(
        "--adapter", default=None, help="LoRA adapter dir (default: none, the base model)"
    )
    p.add_argument(
        "--id",
        default=None,
        help="task id: splice into its template, must run (default: none; a free prompt)",
    )
    p.add_argument(
        "--tasks",
        default=None,
        help="where --id is looked up (default: the project's data/tasks.jsonl)",
    )
    p.add_argument("--prompt", default=None, help="free prompt (default: stdin when no --id)")
    p.add_argument(
        "-k",
        type=int,
        default=BEST_OF,
        help="samples drawn; the first that prints the task's expected output (--id) or, for a "
        "bare prompt, exits cleanly is shown",
    )
    _knob(p, ("--temperature",), "temperature")
    _knob(p, ("--seed",), "seed")
    _knob(p, ("--max-tokens",), "max_tokens")
    return p


def run_generate(args: argparse.Namespace) -> int:
    """Best-of-k: print the first of k samples the ruler accepts (exit 1 when none is): for a
    task, its output is the expected output; for a bare prompt, it exits cleanly (compiled, exit
    0, nothing on stderr: unverified, there is nothing to compare its output with)."""
    if args.k < 1:
        raise ValueError(f"-k must be >= 1, got {args.k}")
    resolve(args.model)  # an unknown model fails before any work
    if args.id:
        path = path_or(args.tasks, "tasks")
        found = [prompt_answer(t) for t in read_tasks(path) if meta(t)["id"] == args.id]
        if not found:
            raise ValueError(f"{path}: no task {args.id!r}")
        what = found[0]
    else:
        what = args.prompt if args.prompt is not None else sys.stdin.read()
    r = generate_best_of_k(
        args.model,
        args.adapter,
        what,
        args.k,
        args.temperature,
        seed=args.seed,
        max_tokens=args.max_tokens,
        progress=True,
    )
    if r["accepted"]:
        what = (
            "verified: prints the task's expected output"
            if r["check"] == "exact"
            else "exits cleanly (unverified: no expected output)"
        )
        print(f"# sample {r['index'] + 1} of {r['k']} {what}", file=sys.stderr)
        if r["stdout"]:
            print(r["stdout"], file=sys.stderr, end="" if r["stdout"].endswith("\n") else "\n")
    else:
        why = "printed the expected output" if r["check"] == "exact" else "exited cleanly"
        print(f"# warning: none of {r['k']} samples {why}; showing the first", file=sys.stderr)
    print(r["body"])
    return 0 if r["accepted"] else 1


def add(subparsers) -> None:
    """Register `eval` and `generate`."""
    p = subparsers.add_parser(
        "eval",
        help="evaluate a model (+adapter) and append a result row",
        description=run_eval.__doc__,
    )
    add_eval_arguments(p).set_defaults(func=run_eval)
    p = subparsers.add_parser(
        "generate",
        help="best-of-k generation verified by the Jac runtime",
        description="Sample k completions for a task (or a prompt) and print the first one the "
        "Jac runtime accepts;\nexit 1 when none is. For a task, accepted means its output is the "
        "expected output; for a bare\nprompt, that it runs cleanly (compiles, exits 0, nothing "
        "on stderr), which is unverified.",
    )
    add_generate_arguments(p).set_defaults(func=run_generate)
