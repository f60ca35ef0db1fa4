"""`jacrl samples FILE`: browse the completions an evaluation kept (`jacrl eval --log-samples`,
`jacrl.samples`): one line per task, or a task's gold and expected output beside its samples.
A DPO artifact's pairs.jsonl (or the artifact's directory): one line per pair, or a task's pairs."""

from __future__ import annotations

import argparse
from pathlib import Path

from jacrl.samples import TIERS, browse, browse_pairs, read_pairs, read_samples


def add(subparsers) -> None:
    """Register `samples`."""
    p = subparsers.add_parser(
        "samples",
        help="browse the completions kept by eval --log-samples",
        description="Browse the completions an evaluation kept (jacrl eval --log-samples): one "
        "line per task, or\none task's gold answer and expected output beside its samples. Given "
        "a DPO artifact's pairs.jsonl\n(or its folder): one line per preference pair, or one "
        "task's pairs.",
    )
    p.add_argument(
        "file",
        metavar="FILE",
        help="a samples file (*.jsonl.gz), or a DPO artifact's pairs.jsonl or directory",
    )
    p.add_argument(
        "--task",
        default=None,
        metavar="ID",
        help="one task: its gold, expected output and completions (default: all)",
    )
    p.add_argument(
        "--tier",
        action="append",
        default=None,
        metavar="TIER",
        help=f"only completions of these tiers ({', '.join(TIERS)}); repeat or "
        "comma-separate (default: all; with neither --task nor --tier, one summary "
        "line per task)",
    )
    p.add_argument(
        "--show",
        choices=("body", "text", "diff"),
        default="body",
        help="each completion as its extracted body, its whole text, or a diff against the gold",
    )
    p.add_argument("--prompt", action="store_true", help="show each task's prompt too")
    p.set_defaults(func=run_samples)


def run_samples(args: argparse.Namespace) -> int:
    if Path(args.file).is_dir() or args.file.endswith(".jsonl"):
        print(
            browse_pairs(
                read_pairs(args.file), args.task, show="text" if args.show == "text" else "body"
            )
        )
        return 0
    head, recs = read_samples(args.file)
    print(browse(head, recs, args.task, args.tier, show=args.show, prompt=args.prompt))
    return 0
