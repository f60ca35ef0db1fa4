"""`jacrl ladder plan | run | show` and `jacrl demo`.

jacrl ladder plan    every cell, its key, whether its rows exist, and the exact command;
                     runs nothing
jacrl ladder run     run the cells without rows; a failing cell is recorded and the ladder
                     goes on
jacrl ladder run --recipe smart   the staged recipe (gate, SFT curve, elbow, GRPO at the
                     elbow) instead of the grid; `ladder plan --recipe smart` shows its stages
jacrl ladder show    pivot, Wilson CIs, McNemar vs base and hole vs conversion; writes figures/
jacrl demo           tasks/splits if needed, a small ladder on jac-tiny, the table and figures
jacrl kernel         install the `jacrl` Jupyter kernel the notebooks and cells run on
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import textwrap
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path

from jacrl import jsonl, kernel, ladder
from jacrl.cli import train as train_cli
from jacrl.cli.evaluate import int_list
from jacrl.conditions import CONDITIONS, DEFAULT_CONDITIONS
from jacrl.config import REWARD_FORMULAS, configure
from jacrl.ladder import LadderConfig, parse_iters
from jacrl.project import figures_for
from jacrl.recipe import DEMO_GATE_THRESHOLD, GATE_THRESHOLD, RECIPE
from jacrl.stages import STAGES

ENGINES = ("local", "ray")  # where cells run: one after another here, or Ray tasks on a cluster
ENGINE_ENV = "JACRL_LADDER_ENGINE"


def parse_sets(items: Sequence[str]) -> dict[str, dict[str, str]]:
    """['sft.iters=5', 'grpo.group_size=2'] -> {'sft': {'iters': '5'}, 'grpo': {...}}: the
    stages given, each of `jacrl.stages.STAGES`."""
    out: dict[str, dict[str, str]] = {}
    for key, value in train_cli.parse_sets(items).items():
        stage, dot, name = key.partition(".")
        if not dot or stage not in STAGES:
            raise ValueError(
                f"--set expects STAGE.KEY=VALUE with STAGE one of {', '.join(STAGES)}, got {key!r}"
            )
        out.setdefault(stage, {})[name] = value
    return out


# Every LadderConfig field is a flag generated from the field (`add_fields`) except these, which
# have flags of their own below (a stage's overrides, pass@k, paths, the recipe); adding a knob is
# its field in jacrl.ladder.settings
OWN_FLAGS = ("n", "k", "data_dir", "results_dir", "figures_dir", "artifacts_dir", "recipe", "sets")
FIELD_FLAGS = tuple(f.name for f in dataclasses.fields(LadderConfig) if f.name not in OWN_FLAGS)
FLAG_CHOICES = {"reward_formula": REWARD_FORMULAS}


def _help(name: str) -> str:
    """A knob's help, its environment variable and its LadderConfig default."""
    f = next(f for f in dataclasses.fields(LadderConfig) if f.name == name)
    d = (
        ",".join(map(str, f.default))
        if isinstance(f.default, tuple)
        else repr(f.default)
        if f.default == ""
        else f.default
    )
    return f"{f.metadata['help']} (env JACRL_LADDER_{name.upper()}; default: {d})"


def add_fields(
    p: argparse.ArgumentParser,
    cls,
    names: Sequence[str],
    choices: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """One `--field-name` flag per named field of the dataclass `cls`: its type from the
    annotation (a tuple is a comma list, converted by `configure`), its help and default from the
    field (`_f`'s metadata); unset flags are None, so `field_values` passes on only what was
    given. Our own 15 lines instead of tyro or
    simple-parsing: no new pinned dependency, and the parser keeps the CLI's one-line errors,
    help formatter and the layering defaults -> env -> flags that `config_from_args` does."""
    hints = typing.get_type_hints(cls)
    for name in names:
        typ = hints[name]
        p.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            help=_help(name),
            type=typ if typ in (int, float) else None,
            choices=(choices or {}).get(name),
        )


def field_values(args: argparse.Namespace, names: Sequence[str]) -> dict:
    """{field: value} of the flags `add_fields` made that were given."""
    return {n: getattr(args, n) for n in names if getattr(args, n, None) is not None}


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of `ladder plan` / `ladder run`."""
    d = LadderConfig()
    p.add_argument(
        "--iters",
        help="N or sft=N,grpo=M (env JACRL_LADDER_ITERS; default "
        f"sft={d.sft_iters},grpo={d.grpo_iters})",
    )
    p.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="STAGE.KEY=V",
        help="hyperparameter override of a stage (" + ", ".join(STAGES) + "), e.g. "
        "sft.learning_rate=1e-3, grpo.group_size=2, star.rounds=1",
    )
    add_fields(p, LadderConfig, FIELD_FLAGS, FLAG_CHOICES)
    p.add_argument("-n", "--samples", type=int, help=_help("n"))
    p.add_argument(
        "-k", help="comma list: " + _help("k") + "; with -n alone: the default's values <= n"
    )
    p.add_argument(
        "--demo",
        action="store_true",
        help="start from the demo's tiny settings (jac-tiny, rungs 1,3, few iterations)",
    )
    p.add_argument(
        "--recipe",
        choices=(RECIPE,),
        help="run the staged compute-smart recipe "
        "instead of every planned cell: gate (sft mem on the first rung), SFT curve "
        "(base + sft, every rung), elbow, GRPO only at the elbow (sft_grpo + a tuned "
        "arm) + raw_grpo on the first rung (env JACRL_LADDER_RECIPE; --conditions is "
        "not read; default: none, every planned cell)",
    )
    p.add_argument(
        "--gate-threshold",
        type=float,
        help="the recipe's gate: the first rung's sft "
        f"mem pass rate to reach (default {GATE_THRESHOLD}; with --demo "
        f"{DEMO_GATE_THRESHOLD}; env JACRL_RECIPE_GATE_THRESHOLD)",
    )
    p.add_argument(
        "--elbow",
        help="the recipe's elbow set by hand: a rung ('3') or per model "
        "('jac-tiny=3,m2=5') (default: the rule's; env JACRL_RECIPE_ELBOW)",
    )
    _paths(p, figures=False)
    return p


def _paths(
    p: argparse.ArgumentParser, figures: bool = True, results: str = "the project's results/"
) -> None:
    p.add_argument(
        "--data",
        "--data-dir",
        dest="data_dir",
        default="",
        help="tasks.jsonl + splits/ (default: the project's data/)",
    )
    p.add_argument(
        "--results",
        default="",
        help=f"results dir: rl_ladder.jsonl, cells/ (default: {results})",
    )
    if figures:
        p.add_argument(
            "--figures",
            default="",
            help="figures dir (default: figures/ beside the "
            "rows; the tracked figures/ only when named: --figures figures)",
        )
    p.add_argument(
        "--artifacts", default="", help="artifacts dir (default: the project's artifacts/)"
    )


def config_from_args(args: argparse.Namespace, env: Mapping[str, str] = os.environ) -> LadderConfig:
    """Defaults (or the demo's), then JACRL_LADDER_* env vars, then flags."""
    cfg = ladder.demo_config() if args.demo else LadderConfig()
    cfg = ladder.from_env(cfg, env)
    ch: dict = field_values(args, FIELD_FLAGS)
    if args.iters:
        ch.update({f"{k}_iters": v for k, v in parse_iters(args.iters).items()})
    if args.recipe:
        ch["recipe"] = args.recipe
    sets = parse_sets(args.sets)
    k = tuple(int_list(args.k)) if args.k else None
    if k is None and args.samples is not None:  # -n alone: the default k that n samples give
        k = tuple(x for x in cfg.k if x <= max(args.samples, 1))
    if args.samples is not None:
        ch["n"] = args.samples
    if k is not None:
        ch["k"] = k
    ch["sets"] = {st: {**cfg.sets.get(st, {}), **sets.get(st, {})} for st in {*cfg.sets, *sets}}
    ch.update(
        data_dir=args.data_dir,
        results_dir=args.results,
        figures_dir=getattr(args, "figures", None) or "",
        artifacts_dir=args.artifacts,
    )
    return ladder.validate(configure(cfg, ch))


def recipe_from_args(args: argparse.Namespace, env: Mapping[str, str] = os.environ):
    """The recipe's knobs: defaults (the demo's gate threshold with --demo), JACRL_RECIPE_*,
    then --gate-threshold / --elbow."""
    return ladder.recipe_config(
        args.demo, env, gate_threshold=args.gate_threshold, elbow=args.elbow
    )


def run_plan(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    print(
        ladder.recipe_plan_text(cfg, recipe_from_args(args))
        if cfg.recipe
        else ladder.plan_text(cfg, args.commands)
    )
    return 0


def engine_of(name: str, address: str | None = None) -> ladder.Engine:
    """The engine called `name` (ENGINES): the one place the local and the Ray engine are
    chosen. Ray is the optional `ray` extra, imported only when asked for."""
    if name not in ENGINES:
        raise ValueError(f"engine {name!r}: choose from {', '.join(ENGINES)}")
    if name == "local":
        return ladder.local_engine()
    try:
        from jacrl.ladder.ray_engine import ray_engine
    except ModuleNotFoundError as e:
        if e.name != "ray":
            raise
        raise ValueError("--engine ray needs Ray: pip install -e '.[ray]'") from None
    return ray_engine(address)


def run_run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    engine = engine_of(args.engine, args.address)
    if cfg.recipe:  # the recipe stops after a gate that did not pass: one line, exit 2
        done = ladder.run_recipe(cfg, recipe_from_args(args), engine=engine)
        if done.stopped:
            raise SystemExit(f"gate: {done.stopped.removeprefix('gate ')}")
        statuses = done.statuses
    else:
        statuses = ladder.run(cfg, engine=engine)
    if args.figures is not None:  # --figures DIR: the figures of all rows, after the run
        for p in ladder.show(cfg.results_dir, cfg.figures_dir)[1]:
            print(f"wrote {p} (+ .svg, .pdf)")
    return 1 if any(s["status"] == "failed" for s in statuses) else 0


def _has_a_row(path: Path, lines: int = 100) -> bool:
    """Whether a file looks like JSON Lines: one of its first non-blank lines is a JSON object
    (an empty file is left to `ladder.show`, which says it holds no rows)."""
    seen = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            if jsonl.is_record(line.encode()):
                return True
            seen += 1
            if seen >= lines:
                break
    return seen == 0


def results_of(arg: str) -> Path:
    """`ladder show --results`: the results folder holding rl_ladder.jsonl, or a rows file; a
    path that is neither is one line saying what was expected."""
    from jacrl.project import path_or

    want = (
        f"expected the results folder that holds {ladder.RESULTS_FILE} (as `jacrl ladder "
        "run --results DIR` writes it), or a rows file"
    )
    path = path_or(arg or None, "results")
    if not path.exists():
        raise ValueError(f"--results {path}: no such file or folder; {want}")
    rows = path if path.is_file() else path / ladder.RESULTS_FILE
    if rows.is_file() and not _has_a_row(rows):
        raise ValueError(
            f"--results {path}: {rows.name} is not a rows file (no line of it is a "
            f"JSON object); {want}"
        )
    return path


def figures_of(args: argparse.Namespace) -> str | None:
    """Where `show` draws: --figures; else a figures/ folder beside the rows (the project's:
    results/figures/), so the tracked figures/ change only when named."""
    return None if args.no_figures else figures_for(args.results, args.figures)


def run_show(args: argparse.Namespace) -> int:
    results = results_of(args.results)
    text, figs = ladder.show(
        results, figures_of(args), include_stale=args.include_stale, where=args.where
    )
    print(text)
    for p in figs:  # each PNG has an .svg and a .pdf beside it
        print(f"wrote {p} (+ .svg, .pdf)")
    return 0


def run_demo(args: argparse.Namespace) -> int:
    ladder.demo(args.results, args.figures, args.data_dir, args.artifacts, args.model)
    return 0


def run_kernel(args: argparse.Namespace) -> int:
    print(kernel.describe(kernel.install(args.prefix)))
    return 0


def ladder_description() -> str:
    """`jacrl ladder --help`: what the ladder does, its verbs, and the conditions of the table
    (`jacrl.conditions`) with their help; the design is the module's docstring and docs/."""
    width = max(map(len, CONDITIONS)) + 4
    conditions = "\n".join(
        textwrap.fill(f"  {name:<{width - 2}}{c.help}", 96, subsequent_indent=" " * width)
        for name, c in CONDITIONS.items()
    )
    return (
        "Run the experiment ladder: every cell (rung x model x condition) trains, evaluates, and "
        "appends its\nrows to results/rl_ladder.jsonl; a cell that has its rows is not run again."
        "\n\n"
        "  jacrl ladder plan   every cell, its key and whether its rows exist; runs nothing\n"
        "  jacrl ladder run    run the cells without rows (a failing cell is recorded, the "
        "rest go on);\n"
        "                      --recipe smart: the staged compute-smart recipe instead\n"
        "  jacrl ladder show   the table (pass rates with Wilson intervals, McNemar against "
        "base) and figures\n\n"
        f"Conditions (--conditions; default: {','.join(DEFAULT_CONDITIONS)}):\n{conditions}\n\n"
        "More: docs/ladder.md."
    )


def add(subparsers) -> None:
    """Register `ladder {plan,run,show}`, `demo` and `kernel` (what the cells run on)."""
    p = subparsers.add_parser(
        "ladder",
        help="plan, run and show the experiment ladder",
        description=ladder_description(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="ladder_verb", required=True)
    q = sub.add_parser(
        "plan", help="show every cell of the ladder (stages, key, status); runs nothing"
    )
    add_arguments(q).set_defaults(func=run_plan)
    q.add_argument(
        "--commands",
        action="store_true",
        help="also the command that runs each cell (a papermill run of notebook 30)",
    )
    q = sub.add_parser("run", help="run the cells without rows (resumable)")
    add_arguments(q).set_defaults(func=run_run)
    q.add_argument(
        "--figures",
        default=None,
        metavar="DIR",
        help="after the run, write the "
        "figures of all rows here (default: none written; `ladder show` writes them)",
    )
    q.add_argument(
        "--engine",
        choices=ENGINES,
        default=os.environ.get(ENGINE_ENV) or "local",
        help="where the cells run: local (one after another, here) or ray (Ray tasks "
        f"on a cluster; pip install -e '.[ray]') (env {ENGINE_ENV})",
    )
    q.add_argument(
        "--address",
        metavar="HOST:PORT",
        help="the Ray cluster of --engine ray (default: RAY_ADDRESS, else a local Ray instance)",
    )
    q = sub.add_parser(
        "show",
        help="show the results: pass rates with Wilson intervals, McNemar against base, "
        "hole-fill against conversion, and the figures",
    )
    q.add_argument(
        "--results",
        default="",
        metavar="DIR|FILE",
        help="the results folder that "
        f"holds {ladder.RESULTS_FILE}, or a rows file (default: the project's "
        "results/)",
    )
    q.add_argument(
        "--figures",
        default="",
        help="figures dir: PNG, SVG and PDF of each figure "
        "(default: figures/ beside the rows: results/figures/ for the project's; the "
        "tracked figures/ only when named: --figures figures)",
    )
    q.add_argument("--no-figures", action="store_true", help="print the table only")
    q.add_argument(
        "--include-stale",
        action="store_true",
        help="keep the rows whose model, "
        "adapter or tasks changed on disk since (marked in a `stale` column)",
    )
    q.add_argument(
        "--where",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only the rows made with this setting, for the table and the figures; "
        "KEY is an evaluation setting (n, k, temperature, max_tokens, gen_limit, "
        "mem_limit, seed, train_seed) or a training stage's STAGE.FIELD (sft.iters, "
        "grpo.group_size, ...: rows without that stage, e.g. base for sft.*, are "
        "kept); repeat for more (all must hold; a KEY twice: either value), e.g. "
        "--where n=8 --where sft.iters=100 (default: every row; a cell whose rows "
        "were made with other settings is flagged below the table); the figures go "
        "to a subfolder named after the filter, e.g. figures/where-n=8/",
    )
    q.set_defaults(func=run_show)
    _add_demo_and_kernel(subparsers)


def _add_demo_and_kernel(subparsers) -> None:
    real, tiny = ladder.real_demo_config(data_dir=""), ladder.demo_config()
    p = subparsers.add_parser(
        "demo",
        help="run a small ladder on a real model (SmolLM2-135M) in minutes: rows and figures in "
        "a fresh results/demo/<time>/ (--results DIR for another), beside the committed rows",
        description="Run a small ladder on a real pretrained model in minutes and print its "
        "table, the figures it drew\nand its rows beside the committed reference rows, saying "
        f"what moved and why. The model is\n{real.models[0]} on the learnable family (rungs "
        f"{' and '.join(real.rungs)} x {', '.join(real.conditions)}); --model jac-tiny runs "
        f"the\nembedded test model (rungs {' and '.join(tiny.rungs)} x "
        f"{', '.join(tiny.conditions)}), building the tasks first\nif they are missing. "
        "Without --results, tracked files are left as they are.",
    )
    _paths(p, results="a fresh results/demo/<UTC time>/")
    p.add_argument(
        "--model",
        default=real.models[0],
        help="registry name or MLX model dir; jac-tiny runs the tiny model's own demo",
    )
    p.set_defaults(func=run_demo)
    p = subparsers.add_parser(
        "kernel",
        help="install the `jacrl` Jupyter kernel (OpenBLAS "
        "preloaded) that the notebooks and the ladder's cells run on",
        description="Install the jacrl Jupyter kernel (this Python with OpenBLAS preloaded) that "
        "the notebooks and\nthe ladder's cells run on.\n\n" + kernel.__doc__.split("\n\n", 1)[1],
    )
    p.add_argument("--prefix", help="install prefix (default: this environment's, sys.prefix)")
    p.set_defaults(func=run_kernel)
