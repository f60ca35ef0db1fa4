"""Can jac-tiny generalize on the learnable family? SFT on rungs of its train pool (the project's
`jacrl.train.sft`), then greedy gen pass@1 on its holdout and mem on the rung's tasks (the
project's `jacrl.evaluate.evaluate`), with per-shape and seen/new-combination breakdowns.

    .venv/bin/python learnable/feasibility.py --rungs 5,80 --iters 400 [--set learning_rate=1e-3]

One training at a time; prints one block per rung and appends it to --out (default
learnable/feasibility.txt). Artifacts are content-addressed, so a rerun with the same settings
reuses its adapters.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from jacrl.blas import ensure_fast_blas  # noqa: E402

# the demo's jac-tiny SFT (jacrl.ladder.demo.DEMO_SFT), inlined so this script does not import
# the ladder
BASE_SFT = {
    "learning_rate": 2e-4,
    "warmup": 0,
    "decay_steps": 10**9,
    "lora_layers": -1,
    "lora_rank": 64,
    "grad_checkpoint": False,
    "batch_size": 1,
    "steps_per_report": 50,
    "steps_per_eval": 10**6,
    "val_batches": 1,
}


def _loadavg() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def _value(v: str):
    for cast in (int, float):
        try:
            return cast(v)
        except ValueError:
            pass
    return v


def breakdown(row: dict, manifest: dict[str, dict]) -> str:
    """Greedy passes per shape, and over holdout combinations seen / not seen in training."""
    by: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for p in row["per_task"]:
        m = manifest[p["id"]]
        for key in (m["shape"], "new combo" if m["new_combo"] else "seen combo"):
            by[key][0] += bool(p["greedy_exact"])
            by[key][1] += 1
    return ", ".join(f"{k} {a}/{b}" for k, (a, b) in by.items())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rungs", default="5,80")
    ap.add_argument("--iters", default="400", help="SFT iterations, one value or one per rung")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="SFTConfig override on top of the demo's jac-tiny SFT",
    )
    ap.add_argument("--max-tokens", type=int, default=96, help="eval budget (bodies < 50)")
    ap.add_argument("--mem-limit", type=int, default=16, help="rung tasks evaluated for mem")
    ap.add_argument("--data", default=str(HERE / "data"))
    ap.add_argument("--artifacts", default="", help="default: the project's artifacts/")
    ap.add_argument("--out", default=str(HERE / "feasibility.txt"))
    ap.add_argument("--log", action="store_true", help="print the trainer's log lines")
    args = ap.parse_args(argv)
    ensure_fast_blas()

    from jacrl.config import EvalConfig, SFTConfig, from_dict
    from jacrl.evaluate import evaluate
    from jacrl.tasks.splits import load_split, rung_tasks
    from jacrl.train import sft

    rungs = args.rungs.split(",")
    iters = [int(x) for x in args.iters.split(",")]
    iters = iters * len(rungs) if len(iters) == 1 else iters
    over = {**BASE_SFT, **dict(kv.split("=", 1) for kv in args.set)}
    over = {k: _value(v) if isinstance(v, str) else v for k, v in over.items()}
    manifest = {r["id"]: r for r in map(json.loads, open(HERE / "manifest.jsonl"))}
    pool, valid = load_split("trainpool", args.data), load_split("valid", args.data)
    holdout = load_split("holdout", args.data)
    for r, n_iter in zip(rungs, iters, strict=True):
        t0, load0 = time.time(), _loadavg()
        train = rung_tasks(pool, r)
        cfg = from_dict(SFTConfig, {**over, "iters": n_iter})
        art = sft(
            "jac-tiny",
            train,
            valid,
            cfg,
            args.artifacts or None,
            log=(lambda m: print(m, flush=True)) if args.log else (lambda _: None),
        )
        t1 = time.time()
        ecfg = EvalConfig(n=0, k=(1,), max_tokens=args.max_tokens)
        gen = evaluate("jac-tiny", art.adapter_path, holdout, ecfg, kind="gen")
        mem = evaluate("jac-tiny", art.adapter_path, train[: args.mem_limit], ecfg, kind="mem")
        t2 = time.time()
        s = art.manifest.get("summary", {})
        block = "\n".join(
            [
                f"rung {r}: {len(train)} train tasks, SFT {n_iter} iters "
                f"{json.dumps({k: v for k, v in over.items() if BASE_SFT.get(k) != v})} "
                f"(base: demo SFT), final train loss {s.get('final_train_loss')}",
                f"  gen {gen['pass1']}/{gen['tasks']} = {gen['pass1_pct']}% "
                f"[{gen['wilson_lo']}, {gen['wilson_hi']}]  runs {gen['run_pct']}%  "
                f"near {gen['near_pct']}%",
                f"  gen by shape: {breakdown(gen, manifest)}",
                f"  mem {mem['pass1']}/{mem['tasks']} = {mem['pass1_pct']}%",
                f"  wall: train {t1 - t0:.0f} s, eval {t2 - t1:.0f} s; loadavg {load0} -> "
                f"{_loadavg()}; artifact {art.key}",
            ]
        )
        print(block, flush=True)
        with open(args.out, "a") as fh:
            fh.write(block + "\n")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TQDM_DISABLE", "1")
    sys.exit(main())
