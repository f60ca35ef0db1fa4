"""Does jac-tiny learn to copy? A cheap probe beside `feasibility.py`: full fine-tuning (every
weight, embeddings included; the project's trainer only does LoRA) with its own AdamW loop on the
learnable family's gold SFT examples (the same chat rendering as `jacrl.train.sft`), and every
`--every` steps a teacher-forced look at the 64 holdout tasks: the answer's mean NLL, the share of
answer tokens the model's argmax gets right, the same over the *copy* tokens only (the holdout
pool's names: what no training answer holds, so only an in-context copy gets them), and the
tasks whose every answer token is the argmax (= greedy decoding reproduces the gold body, which
passes). Not a replacement for `jacrl.evaluate`; a fast signal of whether copying ever appears.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python learnable/copy_probe.py --rung all --steps 300
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from jacrl.blas import ensure_fast_blas  # noqa: E402


def _loadavg() -> str:
    return " ".join(open("/proc/loadavg").read().split()[:3])


def encode(tok, task) -> tuple[list[int], int]:
    """(token ids of system + user + assistant = fenced gold body, where the answer starts)."""
    from jacrl.prompts import chat_messages
    from jacrl.tasks.record import fenced, gold_body

    full = tok.apply_chat_template(
        chat_messages(task["prompt"], fenced(gold_body(task))), return_dict=False
    )
    head = tok.apply_chat_template(
        chat_messages(task["prompt"]), add_generation_prompt=True, return_dict=False
    )
    return list(full), len(head)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rung", default="all")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", default=str(HERE / "data"))
    ap.add_argument(
        "--fresh",
        action="store_true",
        help="train on fresh programs instead: the "
        "train side of generate(seed) for seeds 1, 2, ... (never built or run; the "
        "same "
        "makers and train pools), each seen once, so no name can be memorized",
    )
    args = ap.parse_args(argv)
    ensure_fast_blas()

    import mlx.core as mx
    import mlx.nn as nn
    import mlx.optimizers as optim
    import numpy as np

    from jacrl.models.registry import load
    from jacrl.tasks import learnable_shapes as S
    from jacrl.tasks.splits import load_split, rung_tasks

    model, tok = load("jac-tiny", fresh=True)
    train = rung_tasks(load_split("trainpool", args.data), args.rung)
    hold = load_split("holdout", args.data)
    hold_ids = (
        {tok.encode(w, add_special_tokens=False)[0] for w in S.HOLD}
        | {tok.encode("." + w, add_special_tokens=False)[0] for w in S.HOLD if w in S.FIELD}
        | {tok.encode(" " + w, add_special_tokens=False)[0] for w in S.HOLD}
    )
    train_words = set(S.POOLS["name"][0]) | set(S.POOLS["field"][0])
    train_ids = (
        {tok.encode(w, add_special_tokens=False)[0] for w in train_words}
        | {tok.encode("." + w, add_special_tokens=False)[0] for w in S.POOLS["field"][0]}
        | {tok.encode(" " + w, add_special_tokens=False)[0] for w in train_words}
    )
    tr, ho = [encode(tok, t) for t in train], [encode(tok, t) for t in hold]
    fresh_seed = [0]

    def more_fresh() -> list:
        from jacrl.ruler.drivers import parse_driver
        from jacrl.tasks import learnable
        from jacrl.tasks.validate import prompt_text

        fresh_seed[0] += 1
        out = []
        for p in learnable.generate(fresh_seed[0]):
            if p.split == "train":
                d = parse_driver(f"{p.id}.jac", p.text)
                out.append(
                    encode(tok, {"prompt": prompt_text(d), "answer": json.dumps({"gold": p.body})})
                )
        return out

    def batch(rows):
        n = max(len(ids) for ids, _ in rows)
        x = np.zeros((len(rows), n), np.int32)
        m = np.zeros((len(rows), n - 1), np.float32)
        for i, (ids, start) in enumerate(rows):
            x[i, : len(ids)] = ids
            m[i, start - 1 : len(ids) - 1] = 1
        return mx.array(x), mx.array(m)

    def loss_fn(model, x, m):
        ce = nn.losses.cross_entropy(model(x[:, :-1]), x[:, 1:])
        return (ce * m).sum() / m.sum()

    sched = optim.join_schedules(
        [
            optim.linear_schedule(0, args.lr, 20),
            optim.cosine_decay(args.lr, max(1, args.steps - 20), args.lr / 10),
        ],
        [20],
    )
    opt = optim.AdamW(learning_rate=sched, weight_decay=0.0)
    step_fn = nn.value_and_grad(model, loss_fn)

    def look(step: int, t0: float, losses: list[float]) -> None:
        seen = ""
        if unseen:  # copy accuracy on unseen train-side programs (train-pool names)
            sok = sn = 0
            for i in range(0, len(unseen), 16):
                x, m = batch(unseen[i : i + 16])
                hit = np.array(model(x[:, :-1]).argmax(-1) == x[:, 1:])
                copy = np.isin(np.array(x[:, 1:]), list(train_ids)) & (np.array(m) > 0)
                sok, sn = sok + hit[copy].sum(), sn + copy.sum()
            seen = f" | unseen train-side copy-token acc {sok / max(sn, 1):.3f} ({int(sn)})"
        nll = ok = n = cok = cn = exact = 0.0
        for i in range(0, len(ho), 16):
            rows = ho[i : i + 16]
            x, m = batch(rows)
            logits = model(x[:, :-1])
            ce = np.array(nn.losses.cross_entropy(logits, x[:, 1:]))
            hit = np.array(logits.argmax(-1) == x[:, 1:])
            tgt, mm = np.array(x[:, 1:]), np.array(m) > 0
            copy = np.isin(tgt, list(hold_ids)) & mm
            nll += ce[mm].sum()
            ok += hit[mm].sum()
            n += mm.sum()
            cok += hit[copy].sum()
            cn += copy.sum()
            exact += sum(bool(hit[j][mm[j]].all()) for j in range(len(rows)))
        tl = sum(losses[-10:]) / max(1, len(losses[-10:]))
        print(
            f"step {step}: train loss {tl:.3f} | holdout nll {nll / n:.3f}, token acc "
            f"{ok / n:.3f}, copy-token acc {cok / max(cn, 1):.3f} ({int(cn)}), all-argmax "
            f"{int(exact)}/{len(ho)}{seen} | {time.time() - t0:.0f} s, load {_loadavg()}",
            flush=True,
        )

    unseen: list = []
    if args.fresh:  # seed 1000's train side: never trained on (the loop uses seeds 1, 2, ...)
        fresh_seed[0] = 999
        unseen = more_fresh()[:64]
        fresh_seed[0] = 0
    rng = np.random.default_rng(args.seed)
    t0, losses, order = time.time(), [], []
    print(
        f"rung {args.rung}: {len(tr)} train tasks, full FT lr {args.lr} batch {args.batch}, "
        f"load {_loadavg()}",
        flush=True,
    )
    look(0, t0, losses)
    for step in range(1, args.steps + 1):
        if len(order) < args.batch:
            if args.fresh:
                tr = more_fresh()
            order += list(rng.permutation(len(tr)))
        idx, order = order[: args.batch], order[args.batch :]
        x, m = batch([tr[i] for i in idx])
        loss, grads = step_fn(model, x, m)
        opt.update(model, grads)
        mx.eval(model.parameters(), opt.state, loss)
        losses.append(loss.item())
        if step % args.every == 0 or step == args.steps:
            look(step, t0, losses)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TQDM_DISABLE", "1")
    sys.exit(main())
