"""`jacrl build-tasks`, `split`, `rung` and `mine`: drivers -> tasks -> splits -> rungs.

Every verb works on any folder: `--drivers DIR` / `--data DIR` point it at a foreign corpus and its
own task set, and the project's drivers/ and data/ are then left alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from jacrl.project import path_or
from jacrl.ruler.drivers import parse_family_map
from jacrl.tasks.build import build_tasks
from jacrl.tasks.corpus import POLICIES
from jacrl.tasks.record import meta
from jacrl.tasks.splits import SplitConfig, build_splits, report, rung

_SPLIT = {f.name: f.metadata["help"] for f in dataclasses.fields(SplitConfig)}


def run_build_tasks(args: argparse.Namespace) -> int:
    """Build the task set; exit 1 when any driver was rejected (with --keep-going what passed is
    still written)."""
    out = path_or(args.out, "data")
    rep = build_tasks(
        args.drivers,
        out,
        progress=True,
        keep_going=args.keep_going,
        family_map=parse_family_map(args.family_map),
        policy=args.policy,
        fixed_timeout=args.fixed_timeout,
    )
    for line in rep.warnings:
        print(f"warning: {line}", file=sys.stderr)
    for line in rep.failures:
        print(line, file=sys.stderr)
    if rep.warnings:
        print(
            f"{len(rep.warnings)} corpus-policy warning(s) (our own drivers/ must keep to it; "
            "--policy off silences them)",
            file=sys.stderr,
        )
    if rep.written:
        print(f"built {len(rep.built)} tasks -> {out}/tasks.jsonl in {rep.seconds:.1f} s")
    if rep.failures:
        done = f"the {len(rep.built)} that passed written" if rep.written else "nothing written"
        print(
            f"build failed: {rep.rejected} driver(s) rejected, {len(rep.failures)} problem(s), "
            f"{done}",
            file=sys.stderr,
        )
        return 1
    return 0


def run_split(args: argparse.Namespace) -> int:
    cfg = SplitConfig(holdout_min=args.holdout_min, valid_n=args.valid_n, seed=args.seed)
    print(report(build_splits(args.data, cfg)))
    return 0


def run_rung(args: argparse.Namespace) -> int:
    for t in rung(args.n, args.data):
        m = meta(t)
        print(f"{m['id']:45s} {m['family']:5s} {m['source']}")
    return 0


def run_mine(args: argparse.Namespace) -> int:
    from jacrl.tasks.mining import candidates, inventory, write_drafts  # lazy: pandas

    df = inventory(args.tree, progress=True)
    print(df.groupby("kind").agg(units=("name", "size"), lines=("lines", "sum")).to_string())
    if args.drafts:
        paths = write_drafts(candidates(args.tree, progress=True), args.drafts)
        print(f"{len(paths)} draft drivers -> {args.drafts}")
    return 0


def add(subparsers) -> None:
    p = subparsers.add_parser("build-tasks", help="validate drivers/ and write data/tasks.jsonl")
    p.add_argument(
        "--drivers", default=None, help="the Jac drivers folder (default: the project's drivers/)"
    )
    p.add_argument(
        "--out",
        "--data",
        dest="out",
        default=None,
        help="where tasks.jsonl and templates/ go (default: the project's data/)",
    )
    p.add_argument(
        "--keep-going",
        action="store_true",
        help="write the drivers that pass even "
        "when others fail (default: any failure writes nothing)",
    )
    p.add_argument(
        "--family-map",
        default=None,
        metavar="MAP",
        help="rename id prefixes to "
        "families: PREFIX=FAMILY pairs, comma-separated (sg=osp,gb=osp), or a file of "
        "them (default: none; the family is the id's prefix)",
    )
    p.add_argument(
        "--policy",
        default="auto",
        choices=POLICIES,
        help="our corpus policy (Source "
        "line, family list, id = file name, family and source mix): auto = errors on "
        "the project's drivers/, warnings on any other folder",
    )
    p.add_argument(
        "--fixed-timeout",
        action="store_true",
        help="every task gets the earlier "
        "harness's 20 s time-out (default: 5 s, or 20 s for a task whose gold run "
        "takes over 1 s)",
    )
    p.set_defaults(func=run_build_tasks)

    p = subparsers.add_parser(
        "split", help="split the tasks into the holdout, the train pool and valid (data/splits/)"
    )
    p.add_argument(
        "--data",
        default=None,
        help="the data dir with tasks.jsonl; splits/ is "
        "written in it (default: the project's data/)",
    )
    p.add_argument(
        "--holdout-min", type=int, default=SplitConfig.holdout_min, help=_SPLIT["holdout_min"]
    )
    p.add_argument("--valid-n", type=int, default=SplitConfig.valid_n, help=_SPLIT["valid_n"])
    p.add_argument(
        "--seed",
        type=int,
        default=SplitConfig.seed,
        help="orders sources before the greedy holdout",
    )
    p.set_defaults(func=run_split)

    p = subparsers.add_parser("rung", help="list the training tasks of rung N")
    p.add_argument(
        "n", help="1 .. the train pool's size, or all (the ladder's: 1, 3, 5, 10, 20, all)"
    )
    p.add_argument(
        "--data", default=None, help="the data dir with splits/ (default: the project's data/)"
    )
    p.set_defaults(func=run_rung)

    p = subparsers.add_parser(
        "mine",
        help="inventory a tree of .jac files; --drafts DIR writes draft drivers of hole candidates",
    )
    p.add_argument("tree", nargs="?", default=None, help="default: jaclang's bundled sources")
    p.add_argument(
        "--drafts", default=None, help="write draft drivers here (default: none written)"
    )
    p.set_defaults(func=run_mine)
