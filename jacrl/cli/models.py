"""`jacrl tiny-model`: rebuild the embedded jac-tiny model (`jacrl.tiny_model`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from jacrl.models import TINY
from jacrl.project import project
from jacrl.tiny_model import TinyModelConfig, build_tiny_model


def add(subparsers) -> None:
    d = TinyModelConfig()
    p = subparsers.add_parser("tiny-model", help="rebuild the embedded jac-tiny model")
    p.add_argument("--out", type=Path, default=None,
                   help="output model directory (default: models/jac-tiny in the project)")
    p.add_argument("--steps", type=int, default=d.steps, help=f"training steps (default: {d.steps})")
    p.add_argument("--seed", type=int, default=d.seed, help=f"random seed (default: {d.seed})")
    p.set_defaults(func=run_tiny_model)


def run_tiny_model(args: argparse.Namespace) -> int:
    out = args.out if args.out is not None else project().models / TINY
    result = build_tiny_model(out, steps=args.steps, seed=args.seed)
    print(json.dumps({
        "out": str(result.out_dir),
        "params": result.params,
        "weights_bytes": result.weights_bytes,
        "final_val_loss": round(result.val_loss[-1][1], 4),
        "wall_s": round(result.wall_s, 1),
    }))
    return 0
