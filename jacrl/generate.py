"""Seeded sampling from a model, and the deployable best-of-k generator.

`generate(model, tokenizer, prompts, n=..., temperature=...)` decodes n completions per prompt in
batches (mlx-lm's BatchGenerator); temperature 0 is greedy, and the same call with the same seed
gives the same samples. `generate_best_of_k` returns the first of k samples the ruler accepts: for
a task, one whose output is the task's expected output; for a bare prompt, one that exits cleanly.
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
from jacrl.reward import clean_exit, default_executor, score_completions

BEST_OF = 8  # samples generate_best_of_k draws by default
PREFILL_STEP = 2048  # prompt tokens per forward pass when prefilling (mlx-lm's default)


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
    max_tokens: int | Sequence[int] = MAX_TOKENS,
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
    top_p / top_k (0 = off): as GRPO's rollouts sample, for measuring at their settings.
    max_tokens: one budget for all, or one per prompt (`jacrl.token_budget`)."""
    # mlx is heavy and absent where only the executor or the reward is used: imported on use
    import mlx.core as mx
    from mlx_lm.generate import BatchGenerator
    from mlx_lm.sample_utils import make_sampler

    if n < 1 or not prompts:
        return [[] for _ in prompts]
    mx.random.seed(seed)
    sampler = make_sampler(temp=temperature, top_p=top_p, top_k=top_k)
    ids = [prompt_ids(tokenizer, p, system) for p in prompts]
    limits = [max_tokens] * len(prompts) if isinstance(max_tokens, int) else list(max_tokens)
    if len(limits) != len(prompts):
        raise ValueError(f"{len(limits)} token budgets for {len(prompts)} prompts")
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
            budgets = [limits[i] for i, _ in chunk]
            if n > 1:  # a prompt's n samples share one prefill: its cache, n times
                caches = {i: _prefilled(model, ids[i]) for i in dict.fromkeys(i for i, _ in chunk)}
                uids = gen.insert(
                    [ids[i][-1:] for i, _ in chunk],
                    budgets,
                    caches=[caches[i] for i, _ in chunk],
                    all_tokens=[ids[i][:-1] for i, _ in chunk],
                )
            else:
                uids = gen.insert([ids[i] for i, _ in chunk], budgets)
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


def _prefilled(model, ids: list[int]) -> list:
    """A KV cache holding all of the prompt but its last token (which the generator feeds, to
    sample the first new token from). BatchGenerator merges the caches it is given into its own
    batch cache without changing them, so one serves every sample of the prompt."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    cache = make_prompt_cache(model)
    head = mx.array([ids[:-1]])
    for start in range(0, head.shape[1], PREFILL_STEP):
        model(head[:, start : start + PREFILL_STEP], cache=cache)
        mx.eval([c.state for c in cache])
    return cache


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
    """Sample k completions; return the first (in sample order) that the ruler accepts, decided
    outside the job (`best_of`): for a task (a record with `answer`), spliced into its template, it
    prints the task's expected output (exact); for a bare prompt, the code block itself exits
    cleanly (`reward.clean_exit`: nothing else can be checked without an expected output). Never
    the job's own "ran", which a program can forge.

    model: registry name or model dir (+ adapter), or an already loaded (model, tokenizer) pair.
    Returns {"accepted", "index" (None if none accepted), "body", "completion", "stdout", "k",
    "check" ("exact" or "clean exit")}; when nothing is accepted, the first sample's body with
    accepted False.
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
    return best_of([s.text for s in samples], task_or_prompt, timeout)


def best_of(texts: Sequence[str], task_or_prompt, timeout: float = 20.0) -> dict:
    """`generate_best_of_k`'s choice among sampled completions `texts` (its return value)."""
    texts, k = list(texts), len(texts)
    is_task = isinstance(task_or_prompt, dict)
    if is_task:
        scored = score_completions(texts, [task_or_prompt["answer"]])
        bodies = [s.body for s in scored]
        verdicts = [s.verdict for s in scored]
        ok = [s.exact for s in scored]
    else:
        bodies = [code_blocks(t)[0].strip("\n") for t in texts]
        verdicts = default_executor().run_many(bodies, timeout=timeout)
        ok = [b.strip() != "" and clean_exit(v) for b, v in zip(bodies, verdicts, strict=True)]
    i = next((j for j, good in enumerate(ok) if good), None)  # in sample order
    return {
        "accepted": i is not None,
        "index": i,
        "body": bodies[i or 0] if bodies else "",
        "completion": texts[i or 0] if texts else "",
        "stdout": verdicts[i].stdout if i is not None else "",
        "k": k,
        "check": "exact" if is_task else "clean exit",
    }
