"""Seeded sampling from a model, and the deployable best-of-k generator.

`generate(model, tokenizer, prompts, n=..., temperature=...)` decodes n completions per prompt in
batches (mlx-lm's BatchGenerator); temperature 0 is greedy, and the same call with the same seed
gives the same samples. `generate_best_of_k` returns the first of k samples that the Jac toolchain
accepts, without looking at the expected output.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from tqdm.auto import tqdm

from jacrl.config import MAX_TOKENS, EvalConfig
from jacrl.extract import code_blocks
from jacrl.models import load
from jacrl.prompts import SYSTEM_PROMPT, prompt_ids
from jacrl.reward import default_executor, score_completions

BEST_OF = 8  # samples generate_best_of_k draws by default


@dataclasses.dataclass(frozen=True)
class Sample:
    text: str
    tokens: int
    truncated: bool  # hit max_tokens before an end-of-sequence token


def generate(
    model,
    tokenizer,
    prompts: Sequence[str],
    *,
    n: int = 1,
    temperature: float = 0.0,
    max_tokens: int = MAX_TOKENS,
    seed: int = EvalConfig.seed,
    batch_size: int = EvalConfig.batch_size,
    system: str = SYSTEM_PROMPT,
    progress: str = "",
    top_p: float = 0.0,
    top_k: int = 0,
) -> list[list[Sample]]:
    """n completions per prompt, decoded in batches of `batch_size` sequences (continuous
    batching, mlx-lm's BatchGenerator). temperature 0 = greedy (argmax). Seeded: the same call
    gives the same samples. progress: a label shows a progress bar over the sequences (stderr).
    top_p / top_k (0 = off): as GRPO's rollouts sample, for measuring at their settings."""
    # mlx is heavy and absent where only the executor or the reward is used: imported on use
    import mlx.core as mx
    from mlx_lm.generate import BatchGenerator
    from mlx_lm.sample_utils import make_sampler

    if n < 1 or not prompts:
        return [[] for _ in prompts]
    mx.random.seed(seed)
    sampler = make_sampler(temp=temperature, top_p=top_p, top_k=top_k)
    ids = [prompt_ids(tokenizer, p, system) for p in prompts]
    jobs = [(i, j) for i in range(len(prompts)) for j in range(n)]
    out: list[list[Sample | None]] = [[None] * n for _ in prompts]
    stops = [[t] for t in tokenizer.eos_token_ids]
    bar = tqdm(total=len(jobs), desc=progress, unit="seq", disable=not progress)
    for start in range(0, len(jobs), batch_size):
        chunk = jobs[start : start + batch_size]
        gen = BatchGenerator(
            model,
            stop_tokens=stops,
            sampler=sampler,
            completion_batch_size=len(chunk),
            prefill_batch_size=min(8, len(chunk)),
        )
        try:
            uids = gen.insert([ids[i] for i, _ in chunk], [max_tokens] * len(chunk))
            toks: dict[int, list[int]] = {u: [] for u in uids}
            reason: dict[int, str] = {}
            while responses := gen.next_generated():
                for r in responses:
                    if r.finish_reason != "stop":
                        toks[r.uid].append(r.token)
                    if r.finish_reason is not None:
                        reason[r.uid] = r.finish_reason
                        bar.update(1)
        finally:
            gen.close()
        for (i, j), u in zip(chunk, uids, strict=True):
            out[i][j] = Sample(tokenizer.decode(toks[u]), len(toks[u]), reason.get(u) == "length")
    bar.close()
    return out  # type: ignore[return-value]


def sample_tasks(model, adapter, tasks: Sequence[dict], cfg, seed: int) -> list[list[Sample]]:
    """`cfg.samples` completions per task's prompt from model + adapter (loaded here), at
    `cfg.temperature` and `cfg.max_tokens`, seeded: how RFT and DPO sample their parent."""
    lm, tok = load(model, adapter)
    return generate(
        lm,
        tok,
        [t["prompt"] for t in tasks],
        n=cfg.samples,
        temperature=cfg.temperature,
        max_tokens=cfg.max_tokens,
        seed=seed,
    )


def generate_best_of_k(
    model,
    adapter: str | os.PathLike | None,
    task_or_prompt,
    k: int = BEST_OF,
    temperature: float = EvalConfig.temperature,
    *,
    seed: int = EvalConfig.seed,
    max_tokens: int = MAX_TOKENS,
    timeout: float = 20.0,
    progress: bool = False,
) -> dict:
    """Sample k completions; return the first (in sample order) that the Jac toolchain accepts —
    for a task (a record with `answer`): spliced into its template, it runs (exit 0); for a bare
    prompt: the code block itself runs. No look at the expected output.

    model: registry name or model dir (+ adapter), or an already loaded (model, tokenizer) pair.
    Returns {"accepted", "index" (None if none accepted), "body", "completion", "stdout", "k"};
    when nothing is accepted, the first sample's body with accepted False.
    """
    lm, tok = load(model, adapter)
    is_task = isinstance(task_or_prompt, dict)
    prompt = task_or_prompt["prompt"] if is_task else str(task_or_prompt)
    samples = generate(
        lm,
        tok,
        [prompt],
        n=k,
        temperature=temperature,
        max_tokens=max_tokens,
        seed=seed,
        progress="samples" if progress else "",
    )[0]
    texts = [s.text for s in samples]
    if is_task:
        scored = score_completions(texts, [task_or_prompt["answer"]])
        bodies = [s.body for s in scored]
        verdicts = [s.verdict for s in scored]
    else:
        bodies = [code_blocks(t)[0].strip("\n") for t in texts]
        verdicts = default_executor().run_many(bodies, timeout=timeout)
    for i, (b, v) in enumerate(zip(bodies, verdicts, strict=True)):
        if b.strip() and v is not None and v.ran:
            return {
                "accepted": True,
                "index": i,
                "body": b,
                "completion": texts[i],
                "stdout": v.stdout,
                "k": k,
            }
    return {
        "accepted": False,
        "index": None,
        "body": bodies[0] if bodies else "",
        "completion": texts[0] if texts else "",
        "stdout": "",
        "k": k,
    }
