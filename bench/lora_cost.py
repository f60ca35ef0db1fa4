"""What a LoRA SFT step costs per trained token on a real model, and what padding and frozen depth
take of it (issue 57): the project's batches of 2 gold examples padded to the longer one, against
length-sorted batches (examples of similar length together), and LoRA on the top 16, 8 or 4
blocks (gradients stop at the lowest adapted block: below it nothing is differentiated).

Every arm trains its own copy of the model on the same examples (the main tasks' train pool,
gold answers as SFT trains them), the arms' steps interleaved round-robin so the host's load
falls on all of them alike; after a warm-up step each step is timed to its `mx.eval`. Reported
per arm: seconds a step, real (unpadded) tokens a step, padding share, real tokens per second and
its ratio to the project's default arm, and the train loss over the last steps (the cost of
adapting fewer blocks: the length-sorted arms train on the very same batches; the default arm
draws its own). Writes bench/results/lora_cost.json.

    .venv/bin/python bench/lora_cost.py [--model smollm2-135m] [--steps 12]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jacrl.blas import ensure_fast_blas  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "lora_cost.json"
ARMS = (  # (name, LoRA blocks from the top, length-sorted batches)
    ("default: 16 blocks, batches as drawn", 16, False),
    ("16 blocks, length-sorted", 16, True),
    ("8 blocks, length-sorted", 8, True),
    ("4 blocks, length-sorted", 4, True),
)


def batches(lengths: list[int], size: int, sort: bool, seed: int = 0) -> list[list[int]]:
    """Index batches of `size` over a seeded shuffle; sorted: each batch of neighbours in length
    order (the batches themselves in shuffled order), so a batch pads little."""
    import numpy as np

    rng = np.random.default_rng(seed)
    order = list(rng.permutation(len(lengths)))
    if sort:
        order.sort(key=lambda i: lengths[i])
    out = [order[i : i + size] for i in range(0, len(order) - size + 1, size)]
    if sort:
        out = [out[i] for i in rng.permutation(len(out))]
    return out


def main() -> int:
    ensure_fast_blas()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--steps", type=int, default=12, help="timed steps per arm (after one warm-up)")
    ap.add_argument("--batch", type=int, default=2)
    args = ap.parse_args()

    import mlx.core as mx
    import mlx.nn as nn
    import mlx.optimizers as optim
    from mlx_lm.tuner.datasets import CacheDataset, ChatDataset

    from jacrl.blas import blas_record
    from jacrl.config import SFTConfig
    from jacrl.models.registry import resolve
    from jacrl.tasks import splits
    from jacrl.tasks.record import gold_records
    from jacrl.train.mlx_compat import iterate_all, lora_model, sft_loss, sliced_head_ok
    from jacrl.train.sft import HEAD_SKIP

    load0 = [round(x, 2) for x in os.getloadavg()]
    base = resolve(args.model)
    records = gold_records(splits.load_split("trainpool", ROOT / "data"))
    arms = []
    for name, blocks, sort in ARMS:
        cfg = SFTConfig(lora_layers=blocks, grad_checkpoint=False, learning_rate=1e-4)
        model, tok, _ = lora_model(base, cfg, Path(tempfile.mkdtemp()))
        ds = CacheDataset(ChatDataset(records, tok, mask_prompt=True))
        lengths = [len(ds[i][0]) for i in range(len(ds))]
        skip = HEAD_SKIP if sliced_head_ok(model, ds[0][0]) else 0  # as SFT runs it
        order = batches(lengths, args.batch, sort)[: args.steps + 1]
        opt = optim.Adam(learning_rate=1e-4)
        step = nn.value_and_grad(model, sft_loss)
        arms.append(
            {
                "name": name,
                "blocks": blocks,
                "sorted": sort,
                "model": model,
                "ds": ds,
                "order": order,
                "opt": opt,
                "step": step,
                "skip": skip,
                "times": [],
                "real": 0,
                "padded": 0,
                "losses": [],
            }
        )
    for i in range(args.steps + 1):  # round-robin: the load falls on every arm alike
        for a in arms:
            sub = [a["ds"][int(j)] for j in a["order"][i]]
            toks, *rest = next(iterate_all(sub, len(sub), 2048, head_skip=a["skip"]))
            t0 = time.perf_counter()
            (loss, ntoks), grads = a["step"](a["model"], toks, *rest)
            a["opt"].update(a["model"], grads)
            mx.eval(a["model"].trainable_parameters(), a["opt"].state, loss)
            if i == 0:
                continue  # warm-up: compilation and first allocations
            a["times"].append(time.perf_counter() - t0)
            a["real"] += sum(len(x[0]) for x in sub)
            a["padded"] += toks.size
            a["losses"].append(float(loss))
    base_rate = None
    out = []
    for a in arms:
        secs = sum(a["times"])
        rate = a["real"] / secs
        base_rate = base_rate or rate
        tail = a["losses"][-max(1, args.steps // 3) :]
        out.append(
            {
                "arm": a["name"],
                "lora_blocks": a["blocks"],
                "length_sorted": a["sorted"],
                "s_per_step": round(secs / len(a["times"]), 3),
                "real_tokens_per_step": round(a["real"] / len(a["times"]), 1),
                "padding_share": round(1 - a["real"] / a["padded"], 4),
                "real_tok_per_s": round(rate, 1),
                "speedup": round(rate / base_rate, 2),
                "loss_last_third": round(sum(tail) / len(tail), 4),
            }
        )
    record = {
        "model": args.model,
        "batch": args.batch,
        "steps": args.steps,
        "examples": len(records),
        "host": blas_record(),
        "load_start": load0,
        "load_end": [round(x, 2) for x in os.getloadavg()],
        "arms": out,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(record, indent=1) + "\n")
    for r in out:
        print(
            f"{r['arm']:40} {r['s_per_step']:7.2f} s/step  {r['real_tok_per_s']:7.1f} real tok/s "
            f"x{r['speedup']:.2f}  padding {100 * r['padding_share']:.0f} %  "
            f"loss {r['loss_last_third']:.3f}"
        )
    print(f"load {load0} -> {record['load_end']}")
    from docs_figures import recorded

    recorded(RESULTS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
