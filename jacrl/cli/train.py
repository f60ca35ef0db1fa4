"""`jacrl train STAGE`: train (or reuse) one content-addressed LoRA artifact and print its path
and key. Hyperparameters are `jacrl.config`'s, resolved as a ladder cell resolves them
(`jacrl.stages.resolve`): JACRL_REWARD_FORMULA, then JACRL_<STAGE>_<FIELD>, then
`--set KEY=VALUE`. `--report-to wandb` tracks the build (not a knob: no key changes)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from collections.abc import Sequence

from jacrl import stages, train
from jacrl.config import config_help, env_formula
from jacrl.stages import STAGES, trainer_of
from jacrl.tasks.record import prompt_answer, read_tasks
from jacrl.tasks.splits import load_split, rung


def parse_sets(items: Sequence[str]) -> dict[str, str]:
    """['iters=5', 'sft.learning_rate=1e-4'] -> {'iters': '5', 'sft.learning_rate': '1e-4'}."""
    out = {}
    for it in items:
        k, sep, v = it.partition("=")
        if not sep:
            raise ValueError(f"--set expects key=value, got {it!r}")
        out[k.strip()] = v.strip()
    return out


def _read_task_file(path: str) -> list[dict]:
    return [prompt_answer(t) for t in read_tasks(path)]


def _tasks(args: argparse.Namespace) -> tuple[list[dict], list[dict] | None]:
    """(train tasks, valid tasks or None) from --rung / --split / --tasks and --valid. A rung is
    validated on the `valid` split when there is one."""
    valid = None
    if args.rung is not None:
        n = args.rung
        train_tasks = rung(int(n) if str(n).isdigit() else n, data_dir=args.data_dir)
        try:
            valid = load_split("valid", data_dir=args.data_dir) or None
        except FileNotFoundError:
            pass
    elif args.split is not None:
        train_tasks = load_split(args.split, data_dir=args.data_dir)
    elif args.tasks is not None:
        train_tasks = _read_task_file(args.tasks)
    else:
        raise ValueError("give --rung N, --split NAME or --tasks FILE")
    if args.valid:
        valid = _read_task_file(args.valid)
    return train_tasks, valid


def run_train(args: argparse.Namespace) -> int:
    """`jacrl train STAGE ...`: train (or reuse) one artifact and print its path and key."""
    stage = STAGES[args.stage]
    cfg = stages.resolve(args.stage, env_formula(os.environ), os.environ, parse_sets(args.sets))
    if args.show_config:
        print(config_help(stage.config))
        print(json.dumps(dataclasses.asdict(cfg), indent=1))
        return 0
    try:  # before any work; a missing package is a user's mistake here (one line, exit 2)
        report_to = ",".join(train.report_services(args.report_to))
    except ImportError as e:
        raise ValueError(str(e)) from None
    train_tasks, valid_tasks = _tasks(args)
    parent = train.Artifact.load(args.parent) if args.parent else None
    kw = {
        "condition": args.condition or args.stage,
        "report_to": report_to,
        "project": args.project,
    }
    if stage.parent != "none":
        kw["parent"] = parent
    elif parent is not None:
        raise ValueError(f"--parent is not used by {args.stage}")
    out = trainer_of(args.stage)(args.model, train_tasks, valid_tasks, cfg, args.out_root, **kw)
    for a in out if isinstance(out, list) else [out]:
        print(
            json.dumps(
                {
                    "path": str(a.path),
                    "key": a.key,
                    "reused": a.reused,
                    "base_model": str(a.base_model),
                }
            )
        )
    return 0


def add(subparsers) -> None:
    """Register `train`."""
    p = subparsers.add_parser(
        "train",
        help="train (or reuse) a content-addressed LoRA artifact",
        description=f"Train a LoRA adapter with one training stage ({', '.join(sorted(STAGES))}) "
        "and print\nits folder and key. An adapter built before from the same inputs (model, "
        "tasks, settings,\ncode) is reused, not retrained.",
    )
    p.add_argument("stage", choices=sorted(STAGES), help="training stage")
    p.add_argument("--model", default="jac-tiny", help="registry name or MLX model dir")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--rung", default=None, help="train on rung N of the train pool (or 'all')")
    src.add_argument("--split", default=None, help="train on a named split")
    src.add_argument("--tasks", default=None, help="train on a tasks.jsonl file")
    p.add_argument(
        "--valid",
        default=None,
        help="valid tasks.jsonl (default: the rung's / split 'valid' when using --rung)",
    )
    p.add_argument(
        "--data",
        "--data-dir",
        dest="data_dir",
        default=None,
        help="the data dir (default: the project's data/)",
    )
    p.add_argument(
        "--parent",
        default=None,
        help="artifact dir to chain from ("
        + "; ".join(
            f"{s.name}: {s.parent} its adapter" for s in STAGES.values() if s.parent != "none"
        )
        + ")",
    )
    p.add_argument("--condition", default=None, help="condition label (default: the stage)")
    p.add_argument(
        "--out-root",
        default=None,
        help="where artifacts are stored (default: the project's artifacts/)",
    )
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a hyperparameter (dotted for nested, e.g. sft.iters=50); "
        "JACRL_<STAGE>_<FIELD> env vars apply first",
    )
    p.add_argument(
        "--report-to",
        default=None,
        metavar="SERVICES",
        help="track the build's metrics: wandb, swanlab or wandb,swanlab (default: "
        "JACRL_REPORT_TO, else none; WANDB_MODE=offline works offline); not a "
        "hyperparameter, so no key changes",
    )
    p.add_argument(
        "--wandb-project",
        "--project-name",
        dest="project",
        default=None,
        help="the tracking project (default: WANDB_PROJECT, else jacrl)",
    )
    p.add_argument("--show-config", action="store_true", help="print the knobs and exit")
    p.set_defaults(func=run_train)
