"""`jacrl learnable`: generate and build the learnable sanity family (`jacrl.tasks.learnable`) into
its own folder (default: the project's learnable/), never drivers/ or data/."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jacrl.tasks import learnable


def run_learnable(args: argparse.Namespace) -> int:
    """Build (drivers, manifest, data/ with splits); with --check only compare the drivers on
    disk with what the generator makes: exit 1 and name the first file that differs."""
    from jacrl.project import project

    folder = Path(args.out) if args.out else project().learnable
    if args.check:
        diff = learnable.check_drivers(folder, args.seed)
        if diff:
            print(
                f"{diff[0]} (and {len(diff) - 1} more)" if len(diff) > 1 else diff[0],
                file=sys.stderr,
            )
            return 1
        print(f"{folder}/drivers: what seed {args.seed} generates")
        return 0
    r = learnable.build(folder, args.seed, progress=True)
    print(
        f"built {r['tasks']} learnable tasks -> {folder}/data in {r['seconds']} s: holdout "
        f"{r['holdout']}, trainpool {r['trainpool']}, valid {r['valid']}"
    )
    return 0


def add(subparsers) -> None:
    p = subparsers.add_parser(
        "learnable",
        help="generate and build the learnable sanity family "
        "into learnable/ (drivers, manifest, data, splits)",
    )
    p.add_argument("--seed", type=int, default=learnable.SEED, help="generator seed")
    p.add_argument(
        "--out", default=None, help="the family's folder (default: the project's learnable/)"
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="only check that the drivers there are what the seed generates; build nothing",
    )
    p.set_defaults(func=run_learnable)
