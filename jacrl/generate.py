"""Seeded sampling from a model, and the deployable best-of-k generator.

`decode(model, tokenizer, requests)` decodes every `Request` (a prompt, n, temperature, budget)
together in one continuous batch (mlx-lm's BatchGenerator), each distinct prompt prefilled once:
an evaluation's greedy answers and samples of all its tasks in one call. `decode_split`
runs it in worker processes of one BLAS thread each (faster on a CPU: see there). `generate(model,
tokenizer, prompts, n=..., temperature=...)` is its one-setting form. Temperature 0 is greedy,
and the same call with the same seed gives the same samples. `generate_best_of_k` returns the
first of k samples the ruler accepts: for a task, one whose output is the task's expected output;
for a bare prompt, one that exits cleanly.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from tqdm.auto import tqdm

from jacrl.config import MAX_TOKENS, EvalConfig
from jacrl.models.registry import load, resolve
from jacrl.prompts import SYSTEM_PROMPT, prompt_ids
from jacrl.ruler.extract import code_blocks
from jacrl.ruler.reward import clean_exit, default_executor, score_completions

BEST_OF = 8  # samples generate_best_of_k draws by default
PREFILL_STEP = 2048  # prompt tokens per forward pass when prefilling (mlx-lm's default)
SEED_STRIDE = 7919  # worker w of `decode_split` seeds seed + w * SEED_STRIDE (w 0: `decode`'s)


@dataclasses.dataclass(frozen=True)
class Sample:
    text: str
    tokens: int
    truncated: bool  # hit max_tokens before an end-of-sequence token
    ids: tuple[int, ...] = ()  # the tokens drawn, the end token included (GRPO's loss scores it)


@dataclasses.dataclass(frozen=True)
class Request:
    """n completions of one prompt at one setting, within max_tokens new tokens each.
    temperature 0 = greedy (argmax); top_p / top_k (0 = off) only when sampling."""

    prompt: str
    n: int = 1
    temperature: float = 0.0
    max_tokens: int = MAX_TOKENS
    top_p: float = 0.0
    top_k: int = 0


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
    """n completions per prompt at one setting (`decode` of one `Request` per prompt).
    temperature 0 = greedy (argmax). Seeded: the same call gives the same samples. progress: a
    label shows a progress bar over the sequences (stderr). top_p / top_k (0 = off): as GRPO's
    rollouts sample, for measuring at their settings. max_tokens: one budget for all, or one per
    prompt (`jacrl.token_budget`)."""
    limits = [max_tokens] * len(prompts) if isinstance(max_tokens, int) else list(max_tokens)
    if len(limits) != len(prompts):
        raise ValueError(f"{len(limits)} token budgets for {len(prompts)} prompts")
    if n < 1:
        return [[] for _ in prompts]
    requests = [
        Request(p, n, temperature, m, top_p, top_k) for p, m in zip(prompts, limits, strict=True)
    ]
    return decode(
        model,
        tokenizer,
        requests,
        seed=seed,
        batch_size=batch_size,
        system=system,
        progress=progress,
    )


def decode(
    model,
    tokenizer,
    requests: Sequence[Request],
    *,
    seed: int = EvalConfig.seed,
    batch_size: int = EvalConfig.batch_size,
    system: str = SYSTEM_PROMPT,
    progress: str = "",
    timing: dict | None = None,
) -> list[list[Sample]]:
    """Every request's completions, decoded together: one mlx-lm BatchGenerator keeps up to
    `batch_size` sequences of any prompts and settings decoding at once (continuous batching: a
    finished sequence leaves, the next enters). Each distinct prompt is prefilled once, when its
    sequences are about to enter, and its cache serves all of them (greedy and samples alike), so
    at most about one batch of prompt caches is alive at a time. Seeded: the same call gives the
    same samples; another mix of requests draws other random numbers, but a greedy completion
    does not depend on its batch (tests/test_evaluate.py). Returns one list per request.
    timing: a dict given is filled with `prefill_s` (prefilling the prompts), `decode_s` (the
    rest of the call: the decode steps), `tokens` (tokens decoded, end tokens included)."""
    # mlx is heavy and absent where only the executor or the reward is used: imported on use
    import mlx.core as mx
    from mlx_lm.generate import BatchGenerator
    from mlx_lm.sample_utils import make_sampler

    samplers: dict[tuple, object] = {}  # one per setting: a batch of one setting samples at once
    groups: dict[str, list[tuple[int, int]]] = {}  # prompt -> its (request, sample) sequences
    for i, r in enumerate(requests):
        if r.max_tokens < 1:
            raise ValueError(f"request {i}: max_tokens must be >= 1, not {r.max_tokens}")
        groups.setdefault(r.prompt, []).extend((i, j) for j in range(r.n))
        if _setting(r) not in samplers:
            samplers[_setting(r)] = make_sampler(temp=r.temperature, top_p=r.top_p, top_k=r.top_k)
    out: list[list[Sample | None]] = [[None] * r.n for r in requests]
    # the longest budgets enter first: the batch's tail, when nothing waits, is the short ones
    pending = deque(
        sorted(
            ((p, seqs) for p, seqs in groups.items() if seqs),
            key=lambda g: -max(requests[i].max_tokens for i, _ in g[1]),
        )
    )
    mx.random.seed(seed)
    gen = BatchGenerator(
        model,
        stop_tokens=[[t] for t in tokenizer.eos_token_ids],
        completion_batch_size=batch_size,
        prefill_batch_size=batch_size,  # its prefill is one token: the rest is shared
    )
    total = sum(map(len, groups.values()))
    bar = tqdm(total=total, desc=progress, unit="seq", disable=not progress)
    live: dict[int, tuple[int, int]] = {}  # uid -> (request, sample)
    toks: dict[int, list[int]] = {}
    start, prefill_s, decoded = time.perf_counter(), 0.0, 0
    try:
        while pending or live:
            while pending and len(live) < batch_size:  # room: the next prompt's sequences
                prompt, seqs = pending.popleft()
                ids = prompt_ids(tokenizer, prompt, system)
                t = time.perf_counter()
                cache = _prefilled(model, ids)
                prefill_s += time.perf_counter() - t
                uids = gen.insert(
                    [ids[-1:]] * len(seqs),
                    [requests[i].max_tokens for i, _ in seqs],
                    caches=[cache] * len(seqs),
                    all_tokens=[ids[:-1]] * len(seqs),
                    samplers=[samplers[_setting(requests[i])] for i, _ in seqs],
                )
                live.update(zip(uids, seqs, strict=True))
                toks.update((u, []) for u in uids)
            responses = gen.next_generated()
            if not responses:
                raise RuntimeError(f"the generator stopped with {len(live)} sequences unfinished")
            decoded += len(responses)
            for r in responses:
                toks[r.uid].append(r.token)
                if r.finish_reason is not None:
                    i, j = live.pop(r.uid)
                    got = toks.pop(r.uid)
                    text = got[:-1] if r.finish_reason == "stop" else got
                    out[i][j] = Sample(
                        tokenizer.decode(text), len(text), r.finish_reason == "length", tuple(got)
                    )
                    bar.update(1)
    finally:
        gen.close()
        bar.close()
    if timing is not None:
        total = time.perf_counter() - start
        timing.update(prefill_s=prefill_s, decode_s=total - prefill_s, tokens=decoded)
    return out  # type: ignore[return-value]


def decode_split(
    model,
    adapter,
    requests: Sequence[Request],
    *,
    workers: int,
    seed: int = EvalConfig.seed,
    batch_size: int = EvalConfig.batch_size,
    system: str = SYSTEM_PROMPT,
    progress: str = "",
    timing: dict | None = None,
) -> list[list[Sample]]:
    """`decode` of `requests` split over `workers` processes, each loading `model` (registry name
    or dir) + `adapter` itself and decoding its share with one BLAS thread. Why: MLX's CPU ops
    outside the matmuls (attention's softmax, SiLU, RoPE) run on one thread, so one process
    leaves a core idle for a third of a decode step; on 2 cores two one-thread processes decode
    ~1.7x the tokens of one two-thread process (bench/real_model_speed.py measures it in an
    evaluation). A prompt's sequences stay in one worker (prefilled once there); prompts go to
    the least-loaded share, the largest token budget first. Worker w draws from seed + w x
    SEED_STRIDE, so the same call with the same `workers` gives the same samples; a greedy
    completion is `decode`'s (it does not depend on its batch). workers 1: `decode` here.
    timing: a dict given gets `workers`, each worker's `decode` timing with its `load_s`
    (loading the model and adapter), in share order."""
    if workers < 1:
        raise ValueError(f"decode workers must be >= 1, not {workers}")
    if workers == 1:
        t = time.perf_counter()
        lm, tok = load(model, adapter)
        one = {"load_s": time.perf_counter() - t}
        out = decode(
            lm,
            tok,
            requests,
            seed=seed,
            batch_size=batch_size,
            system=system,
            progress=progress,
            timing=one,
        )
        if timing is not None:
            timing["workers"] = [one]
        return out
    model = resolve(model)  # an unknown model: its one-line error here, before any worker
    shares = _shares(requests, workers)
    out: list[list[Sample] | None] = [None] * len(requests)
    # Worker processes run `python -m jacrl.generate IN OUT` (not multiprocessing: its spawn
    # re-runs the caller's main script, which a notebook or an unguarded script cannot take)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory(prefix="jacrl-decode-") as tmp:
        procs = []
        for w, share in enumerate(shares):
            job, result = Path(tmp) / f"job-{w}.pkl", Path(tmp) / f"result-{w}.pkl"
            job.write_bytes(
                pickle.dumps(
                    {
                        "model": str(model),  # a directory
                        "adapter": str(adapter) if adapter else None,
                        "requests": [requests[i] for i in share],
                        "seed": seed + w * SEED_STRIDE,
                        "batch_size": batch_size,
                        "system": system,
                    }
                )
            )
            cmd = [sys.executable, "-m", "jacrl.generate", str(job), str(result)]
            procs.append((subprocess.Popen(cmd, env=env), result))
        bar = tqdm(total=len(shares), desc=progress, unit="share", disable=not progress)
        failed = []
        try:
            for w, (proc, _) in enumerate(procs):
                if proc.wait() != 0:
                    failed.append(f"worker {w} exited {proc.returncode}")
                bar.update(1)
        finally:  # interrupted: no worker outlives the call
            for proc, _ in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            bar.close()
        if failed:
            raise RuntimeError(f"decode_split: {'; '.join(failed)} (the workers' errors are above)")
        worker_timing = []
        for share, (_, result) in zip(shares, procs, strict=True):
            got, spent = pickle.loads(result.read_bytes())
            for i, samples in zip(share, got, strict=True):
                out[i] = samples
            worker_timing.append(spent)
    if timing is not None:
        timing["workers"] = worker_timing
    return out  # type: ignore[return-value]


def _decode_share(job: Path, result: Path) -> None:
    """One worker of `decode_split` (its own process): the job's share decoded, the samples and
    the worker's timing pickled into `result`."""
    j = pickle.loads(job.read_bytes())
    t = time.perf_counter()
    lm, tok = load(j["model"], j["adapter"])
    spent = {"load_s": time.perf_counter() - t}
    got = decode(
        lm,
        tok,
        j["requests"],
        seed=j["seed"],
        batch_size=j["batch_size"],
        system=j["system"],
        timing=spent,
    )
    result.write_bytes(pickle.dumps((got, spent)))


def _shares(requests: Sequence[Request], workers: int) -> list[list[int]]:
    """Request indices per worker (the empty ones dropped): all requests of a prompt together;
    prompts by decreasing work (sequences x budget), each to the share with the least so far."""
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(requests):
        groups.setdefault(r.prompt, []).append(i)
    work = {
        p: sum(requests[i].n * requests[i].max_tokens for i in idx) for p, idx in groups.items()
    }
    shares: list[list[int]] = [[] for _ in range(workers)]
    load_of = [0] * workers
    for p in sorted(groups, key=lambda q: -work[q]):  # stable: ties keep the requests' order
        w = min(range(workers), key=lambda j: load_of[j])
        shares[w].extend(groups[p])
        load_of[w] += work[p]
    return [sorted(s) for s in shares if s]


def _setting(r: Request) -> tuple:
    """The sampler a request decodes with (greedy ignores top-p and top-k)."""
    return (r.temperature, r.top_p, r.top_k) if r.temperature else (0.0, 0.0, 0)


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
    `cfg.temperature` and `cfg.max_tokens`, seeded, all tasks in one batch (`decode`): how RFT,
    STaR and DPO sample their parent."""
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


if __name__ == "__main__":  # a `decode_split` worker: python -m jacrl.generate JOB RESULT
    from jacrl.generate import _decode_share  # the module's own classes, not __main__'s copies

    try:
        _decode_share(Path(sys.argv[1]), Path(sys.argv[2]))
    except Exception as e:  # noqa: BLE001  (one line on stderr; decode_split raises)
        sys.exit(f"jacrl decode worker: {type(e).__name__}: {e}")
