"""Grade completions; one result row per evaluation.

`evaluate(model, adapter, tasks, EvalConfig(n=..., temperature=..., k=...))` generates one greedy
completion and `n` temperature samples per task (batched, fixed seed; `jacrl.generate`), grades
them with the real Jac toolchain (`jacrl.ruler.reward`) and returns one row: the earlier harness's
fields plus the unbiased pass@k, best-of-k deploy, Wilson bounds, truncation and provenance.
`jacrl.results` appends rows to a JSONL file and reads them back.

Row fields (percentages are 0-100, 2 dp; counts are over the `tasks` evaluated):

    tag, split, kind     free labels (ladder: `r<N>/<model>/<cond>/<gen|mem>`)
    model, adapter       what was loaded (`adapter` "" = base)
    tasks                tasks evaluated
    runs, run_pct        greedy completion exited cleanly as the server saw it (compiled, exit 0,
                         nothing on stderr: `reward.clean_exit`), never the job's own "ran"
    compiled, compile_pct
                         greedy body compiled (reward tier exact, runs or compiles)
    reward_mean          mean greedy reward under the default formula (`jacrl.ruler.reward`: tiered,
                         with body similarity): a graded measure where pass@1 sits at 0
    pass1, pass1_pct     greedy stdout == expected (whole output whitespace-trimmed)
    wilson_lo, wilson_hi 95 % Wilson interval of pass1/tasks, in percent
    near_pass, near_pct  greedy ran and output similarity (difflib) >= 0.9
    norm_pass            greedy ran and output equal after collapsing whitespace runs
    avg_osim             mean output similarity (0 for a greedy that did not run)
    avg_idiom            idiom markers (`jacrl.ruler.jacsyntax.IDIOMS`, unweighted) per running
                         greedy body; not a score
    truncation_pct       greedy completions that hit `max_tokens`
    k, greedy_or_k, greedy_or_k_pct
                         the earlier harness's "pass@k": greedy or any of the first k samples
                         exact; k = largest requested k <= n (1 when n = 0). Not pass@k: named
                         apart so no name means two things
    pass_at_k            {k: unbiased pass@k in percent} from the n samples (greedy excluded),
                         each k <= n (Chen et al. 2021); the only pass@k this project reports
    bestofk              first of the first k samples (in sample order) that exits cleanly (no
                         look at the expected output): is it exact?
                         deploy / coverage (one ran) / oracle (one was exact) counts
    sample_truncation_pct, sample_run_pct
                         over all n x tasks samples
    by_family            {family: [greedy passes, tasks]}
    n, temperature, seed, max_tokens
                         sampling settings
    budget_factor, budget_tokens
                         per-task token budgets (`jacrl.token_budget`; 0 = max_tokens for all)
                         and their sum; each task's in per_task `budget`
    decode_workers       processes the decoding was split over (`jacrl.generate.decode_split`;
                         samples depend on it, greedy answers do not)
    artifact             the adapter's content key (from its manifest.json), "" otherwise
    isolation            the executor's isolation level when grading: sandbox, namespaces or
                         rlimits-only
    provenance           git commit, code hash, versions, model/adapter/data hashes, time
    seconds              wall time of load / generate (greedy and samples together) / grade
    samples              the file keeping every completion (`evaluate(..., samples=PATH)`,
                         `jacrl eval --log-samples`; `jacrl.samples`), "" when none kept
    per_task             [{id, family, greedy_exact, greedy_tier, greedy_reward, osim, truncated,
                         samples_correct, samples_ran, deploy, budget}]
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import time
from collections.abc import Iterable, Sequence

from jacrl.blas import blas_record
from jacrl.config import EvalConfig
from jacrl.generate import Request, Sample, decode, decode_split
from jacrl.models.registry import display_path, load, load_tokenizer, portable, resolve
from jacrl.provenance import adapter_key, provenance
from jacrl.results import format_row
from jacrl.ruler.jacsyntax import idiom_count
from jacrl.ruler.reward import Scored, clean_exit, reward_isolation, score_completions
from jacrl.samples import COMPILED, write_samples
from jacrl.samples import header as samples_header
from jacrl.samples import records as sample_records
from jacrl.stats import mean_pass_at_k, wilson
from jacrl.tasks.record import family_of, meta, prompt_answer, read_tasks
from jacrl.token_budget import budgets

NEAR = 0.9  # output similarity for a "near pass"


# -------------------------------------------------------------------------------------------
# grading
# -------------------------------------------------------------------------------------------


def output_similarity(stdout: str, expected: str) -> float:
    return difflib.SequenceMatcher(None, stdout.strip(), expected.strip()).ratio()


def _norm_ws(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def _ran(s: Scored) -> bool:
    """Ran, as decided outside the job (the job's own "ran" is a claim it can forge)."""
    return clean_exit(s.verdict)


def _pct(x: float, n: int) -> float:
    return round(100.0 * x / n, 2) if n else 0.0


def check_k(k: Iterable[int], n: int) -> list[int]:
    """The pass@k values as ints, each in 1..n (k = 1 alone with n = 0: the greedy answer); a
    k that the n samples cannot give is an error, never silently dropped."""
    ks = [int(x) for x in k]
    for x in ks:
        if not 1 <= x <= max(n, 1):
            raise ValueError(f"pass@k needs 1 <= k <= n samples per task: got k={x} with n={n}")
    return ks


def score_all(
    tasks: Sequence[dict], greedy: Sequence[Sample], samples: Sequence[Sequence[Sample]]
) -> tuple[list[Scored], list[list[Scored]]]:
    """Every greedy completion and every sample graded, in one batch each."""
    answers = [t["answer"] for t in tasks]
    g_scored = score_completions([s.text for s in greedy], answers)
    flat = [(i, s) for i, ss in enumerate(samples) for s in ss]
    s_flat = (
        score_completions([s.text for _, s in flat], [answers[i] for i, _ in flat]) if flat else []
    )
    s_scored: list[list[Scored]] = [[] for _ in tasks]
    for (i, _), sc in zip(flat, s_flat, strict=True):
        s_scored[i].append(sc)
    return g_scored, s_scored


def _outcome(task: dict, g: Sample, gs: Scored, ss: list[Scored], k_row: int) -> dict:
    """One task's per_task entry, plus (after `deploy`) the private counts the row sums."""
    m = meta(task)
    expected = m["expected_output"]
    ran, exact = _ran(gs), gs.exact
    osim = output_similarity(gs.verdict.stdout, expected) if ran else 0.0
    first_k = ss[:k_row]
    runner = next((s for s in first_k if _ran(s)), None)  # no look at the expected output
    return {
        "id": m["id"],
        "family": family_of(task),
        "greedy_exact": exact,
        "greedy_tier": gs.tier,
        "greedy_reward": gs.score,
        "osim": round(osim, 4),
        "truncated": g.truncated,
        "samples_correct": sum(s.exact for s in ss),
        "samples_ran": sum(_ran(s) for s in ss),
        "deploy": None if runner is None else runner.exact,
        "_ran": ran,
        "_compiled": gs.tier in COMPILED,
        "_osim": osim,
        "_near": ran and osim >= NEAR,
        "_norm": ran and _norm_ws(gs.verdict.stdout) == _norm_ws(expected),
        "_idiom": idiom_count(gs.body) if ran else 0,
        "_greedy_or_k": exact or any(s.exact for s in first_k),
        "_deploy": runner is not None and runner.exact,
        "_covered": runner is not None,
        "_oracle": any(s.exact for s in first_k),
    }


def _as_sample(s: Sample | str) -> Sample:
    return s if isinstance(s, Sample) else Sample(str(s), 0, False)


def grade(
    tasks: Sequence[dict],
    greedy: Sequence[Sample | str],
    samples: Sequence[Sequence[Sample | str]] | None = None,
    *,
    k: Sequence[int] = EvalConfig.k,
    scored: tuple[list[Scored], list[list[Scored]]] | None = None,
) -> dict:
    """The metric part of a row from completions already generated: greedy[i] and samples[i]
    (n each, in sample order) for tasks[i]. Strings count as untruncated samples. scored: their
    grades (`score_all`) when the caller already has them."""
    tasks = list(tasks)
    greedy = [_as_sample(s) for s in greedy]
    samples = [[_as_sample(s) for s in ss] for ss in (samples or [[] for _ in tasks])]
    if not (len(tasks) == len(greedy) == len(samples)):
        raise ValueError("tasks, greedy and samples must have one entry per task")
    n = max((len(ss) for ss in samples), default=0)
    if any(len(ss) != n for ss in samples):
        raise ValueError("every task needs the same number of samples")
    g_scored, s_scored = scored if scored is not None else score_all(tasks, greedy, samples)
    ks = sorted({int(x) for x in k if 1 <= int(x) <= n})
    k_row = ks[-1] if ks else 1
    outs = [_outcome(*a, k_row) for a in zip(tasks, greedy, g_scored, s_scored, strict=True)]
    per_task = [{f: v for f, v in o.items() if not f.startswith("_")} for o in outs]

    def count(field: str) -> int:
        return sum(o[field] for o in outs)

    by_family: dict[str, list[int]] = {}
    for p in per_task:
        fam_count = by_family.setdefault(p["family"], [0, 0])
        fam_count[0] += p["greedy_exact"]
        fam_count[1] += 1
    N, runs, pass1 = len(tasks), count("_ran"), count("greedy_exact")
    lo, hi = wilson(pass1, N)
    all_samples = [s for ss in samples for s in ss]
    all_scored = [s for ss in s_scored for s in ss]
    deploy, coverage, oracle = count("_deploy"), count("_covered"), count("_oracle")
    return {
        "tasks": N,
        "k": k_row,
        "runs": runs,
        "pass1": pass1,
        "greedy_or_k": count("_greedy_or_k"),
        "near_pass": count("_near"),
        "norm_pass": count("_norm"),
        "run_pct": _pct(runs, N),
        "compiled": count("_compiled"),
        "compile_pct": _pct(count("_compiled"), N),
        "reward_mean": round(sum(p["greedy_reward"] for p in per_task) / N, 4) if N else 0.0,
        "pass1_pct": _pct(pass1, N),
        "greedy_or_k_pct": _pct(count("_greedy_or_k"), N),
        "near_pct": _pct(count("_near"), N),
        "avg_osim": round(sum(o["_osim"] for o in outs) / N, 4) if N else 0.0,
        "avg_idiom": round(count("_idiom") / runs, 2) if runs else 0.0,
        "by_family": by_family,
        "wilson_lo": round(100 * lo, 2),
        "wilson_hi": round(100 * hi, 2),
        "pass_at_k": {
            str(kk): round(
                100 * mean_pass_at_k([n] * N, [p["samples_correct"] for p in per_task], kk), 2
            )
            for kk in ks
        },
        "bestofk": (
            {
                "k": k_row,
                "deploy": deploy,
                "deploy_pct": _pct(deploy, N),
                "coverage": coverage,
                "coverage_pct": _pct(coverage, N),
                "oracle": oracle,
                "oracle_pct": _pct(oracle, N),
            }
            if n > 0
            else None
        ),
        "truncation_pct": _pct(sum(g.truncated for g in greedy), N),
        "sample_truncation_pct": _pct(sum(s.truncated for s in all_samples), len(all_samples)),
        "sample_run_pct": _pct(sum(_ran(s) for s in all_scored), len(all_scored)),
        "per_task": per_task,
    }


# -------------------------------------------------------------------------------------------
# evaluate
# -------------------------------------------------------------------------------------------


_REF_FIELDS = (
    "tasks",
    "k",
    "runs",
    "pass1",
    "greedy_or_k",
    "near_pass",
    "norm_pass",
    "run_pct",
    "pass1_pct",
    "greedy_or_k_pct",
    "near_pct",
    "avg_osim",
    "avg_idiom",
    "by_family",
)
_OURS = (
    "compiled",
    "compile_pct",
    "reward_mean",
    "wilson_lo",
    "wilson_hi",
    "pass_at_k",
    "bestofk",
    "truncation_pct",
    "sample_truncation_pct",
    "sample_run_pct",
)


def _tasks(tasks) -> list[dict]:
    if tasks is None:
        raise ValueError("evaluate needs tasks: a list of task records or a tasks.jsonl path")
    if isinstance(tasks, (str, os.PathLike)):
        return [prompt_answer(t) for t in read_tasks(tasks)]
    return list(tasks)


def complete(
    lm,
    tok,
    prompts: list[str],
    cfg: EvalConfig,
    timings: dict[str, float],
    progress: bool,
    limits: list[int],
    source: tuple | None = None,
    decode_timing: dict | None = None,
) -> tuple[list[Sample], list[list[Sample]]]:
    """The greedy completion and cfg.n samples of every prompt, each within its token budget
    (`limits`), decoded together in one batch (each prompt prefilled once), or split over
    cfg.decode_workers processes that load `source` (model, adapter) themselves; the time goes
    in `timings`, the decode's own split of it in `decode_timing` (`decode`'s `timing`; split:
    `decode_split`'s)."""
    t = time.perf_counter()
    greedy = [Request(p, 1, 0.0, m) for p, m in zip(prompts, limits, strict=True)]
    sampled = [Request(p, cfg.n, cfg.temperature, m) for p, m in zip(prompts, limits, strict=True)]
    requests = greedy + (sampled if cfg.n > 0 else [])
    bar = "generate" if progress else ""
    if cfg.decode_workers > 1:
        if source is None:
            raise ValueError(
                "decode_workers > 1 needs the model as a name or directory (each worker loads "
                "it), not a loaded (model, tokenizer) pair"
            )
        out = decode_split(
            *source,
            requests,
            workers=cfg.decode_workers,
            seed=cfg.seed,
            batch_size=cfg.batch_size,
            progress=bar,
            timing=decode_timing,
        )
    else:
        out = decode(
            lm,
            tok,
            requests,
            seed=cfg.seed,
            batch_size=cfg.batch_size,
            progress=bar,
            timing=decode_timing,
        )
    timings["generate"] = time.perf_counter() - t
    samples = out[len(prompts) :] if cfg.n > 0 else [[] for _ in prompts]
    return [s[0] for s in out[: len(prompts)]], samples


def _provenance(model_dir, adapter, tasks: list[dict]) -> dict:
    """The row's provenance, with the BLAS kernel family and threads this host computed with:
    another host's numerics train another adapter from the same key (the demo's reference
    check names them)."""
    blas = blas_record()
    return {
        **provenance(model_dir, adapter, tasks),
        "blas_core": blas["openblas_core"] or "bundled",
        "blas_threads": blas["threads"],
    }


def evaluate(
    model,
    adapter: str | os.PathLike | None = None,
    tasks=None,
    cfg: EvalConfig | None = None,
    *,
    tag: str = "",
    split: str = "",
    kind: str = "",
    log=None,
    progress: bool = False,
    samples: str | os.PathLike | None = None,
) -> dict:
    """Evaluate model (+ adapter) on tasks; returns one result row (see the module docstring).

    model: registry name or model dir (or an already loaded (model, tokenizer) pair, in which case
    pass `adapter` only as a label). tasks: task records or a tasks.jsonl path. cfg: samples per
    task, pass@k values (those <= n are reported), temperature, seed, token budget, batch size.
    log: called with `format_row(row)`. progress: progress bars over the sequences (stderr).
    samples: a `*.jsonl.gz` path to keep every completion in (`jacrl.samples`: task, sample
    index, text, extracted body, tier, reward, truncated), named by the row's `samples` field.
    """
    cfg = cfg or EvalConfig()
    t_all = time.perf_counter()
    tasks = _tasks(tasks)
    if not tasks:
        raise ValueError("no tasks to evaluate")
    isolation = reward_isolation()  # refuses here, before loading a model, without a sandbox
    timings: dict[str, float] = {}
    t = time.perf_counter()
    if isinstance(model, tuple):
        (lm, tok), model_dir = model, None
    else:
        model_dir = resolve(model)
        if cfg.decode_workers > 1:  # the workers load the weights; here only the tokenizer
            lm, tok = None, load_tokenizer(model)
        else:
            lm, tok = load(model, adapter)
    timings["load"] = time.perf_counter() - t
    limits = budgets(tok, tasks, cfg.budget_factor, cfg.max_tokens)
    prompts = [tt["prompt"] for tt in tasks]
    source = None if model_dir is None else (model_dir, adapter)
    greedy, completions = complete(lm, tok, prompts, cfg, timings, progress, limits, source)

    t = time.perf_counter()
    if progress:
        print(f"grading {len(tasks) * (1 + cfg.n)} completions", file=sys.stderr, flush=True)
    scored = score_all(tasks, greedy, completions)
    metrics = grade(tasks, greedy, completions, k=cfg.k, scored=scored)
    for p, b in zip(metrics["per_task"], limits, strict=True):
        p["budget"] = b
    timings["grade"] = time.perf_counter() - t
    row = {
        "tag": tag,
        "model": portable(model) if model_dir else "",
        "adapter": portable(adapter) if adapter else "",
        **{kk: metrics[kk] for kk in _REF_FIELDS},
        "split": split,
        "kind": kind,
        "n": cfg.n,
        "temperature": cfg.temperature if cfg.n else 0.0,
        "seed": cfg.seed,
        "max_tokens": cfg.max_tokens,
        "budget_factor": cfg.budget_factor,
        "decode_workers": cfg.decode_workers,
        "budget_tokens": sum(limits),
        **{kk: metrics[kk] for kk in _OURS},
        "artifact": adapter_key(adapter),
        "isolation": isolation,
        "provenance": _provenance(model_dir, adapter, tasks),
        "seconds": {
            **{kk: round(v, 2) for kk, v in timings.items()},
            "total": round(time.perf_counter() - t_all, 2),
        },
        "samples": display_path(samples) if samples else "",
        "per_task": metrics["per_task"],
    }
    if samples:
        write_samples(
            samples,
            samples_header(row, tasks),
            sample_records(tasks, greedy, completions, *scored, row["temperature"]),
        )
    if log:
        log(format_row(row))
    return row
