"""Sample, grade, one result row.

`evaluate(model, adapter, tasks, n=..., temperature=..., k=...)` generates one greedy completion and
`n` temperature samples per task (batched, fixed seed), grades them with the real Jac toolchain
(`jacrl.reward`) and returns one row: the reference harness's fields (SPEC §7.2) plus the unbiased
pass@k, best-of-k deploy, Wilson bounds, truncation and provenance. `append_row` adds it to a JSONL
file with one `write` + `fsync`; `read_rows` reads such a file and skips a torn last line.

Every prompt is rendered with the model's chat template as [system = SYSTEM_PROMPT, user = task
prompt] — the same messages SFT trains on and GRPO rolls out with (`jacrl.train` imports them).

Row fields (percentages are 0-100, 2 dp; counts are over the `tasks` evaluated):

| field | meaning |
|---|---|
| `tag`, `split`, `kind` | free labels (ladder: `r<N>/<model>/<cond>/<gen|mem>`) |
| `model`, `adapter` | what was loaded (`adapter` "" = base) |
| `tasks` | tasks evaluated |
| `runs`, `run_pct` | greedy completion ran (exit 0) |
| `pass1`, `pass1_pct` | greedy stdout == expected (whole output whitespace-trimmed) |
| `wilson_lo`, `wilson_hi` | 95 % Wilson interval of pass1/tasks, in percent |
| `near_pass`, `near_pct` | greedy ran and output similarity (difflib) >= 0.9 |
| `norm_pass` | greedy ran and output equal after collapsing whitespace runs |
| `avg_osim` | mean output similarity (0 for a greedy that did not run) |
| `avg_idiom` | idiom markers per running greedy body (SPEC §7.1; not a score) |
| `truncation_pct` | greedy completions that hit `max_tokens` |
| `k`, `greedy_or_k`, `greedy_or_k_pct` | the earlier harness's "pass@k": greedy or any of the first k samples exact; k = largest requested k <= n (1 when n = 0). Not pass@k: named apart so no name means two things |
| `pass_at_k` | {k: unbiased pass@k in percent} from the n samples (greedy excluded), each k <= n (Chen et al. 2021); the only pass@k this project reports |
| `bestofk` | first of the first k samples (in sample order) that runs: is it exact? deploy / coverage / oracle counts (SPEC §7.5) |
| `sample_truncation_pct`, `sample_run_pct` | over all n x tasks samples |
| `by_family` | {family: [greedy passes, tasks]} |
| `n`, `temperature`, `seed`, `max_tokens` | sampling settings |
| `artifact` | the adapter's content key (from its manifest.json), "" otherwise |
| `isolation` | the executor's isolation level when grading: sandbox, namespaces or rlimits-only |
| `provenance` | git commit, code hash, versions, model/adapter/data hashes, time |
| `seconds` | wall time of load / greedy / sample / grade |
| `per_task` | [{id, family, greedy_exact, greedy_tier, osim, truncated, samples_correct, samples_ran, deploy}] |
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import difflib
import hashlib
import json
import os
import platform
import re
import sys
import time
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

from jacrl.models import portable
from jacrl.reward import Scored, score_completions
from jacrl.stats import pass_at_k, wilson

SYSTEM_PROMPT = ("You are an expert Jac programmer. Answer with only the requested Jac code, in "
                 "one ```jac code block.")
MAX_TOKENS = 512  # the reference's eval budget (SPEC §7.1); GRPO uses the same by default
NEAR = 0.9  # output similarity for a "near pass"
IDIOM_MARKERS = ("walker ", "node ", "edge ", "with entry", "with exit", "can ", "visit ", "spawn",
                 "disengage", "-->", "<--", "++>", "<++", " obj ", "has ", "report ", " root",
                 " here")


# -------------------------------------------------------------------------------------------
# prompts and generation
# -------------------------------------------------------------------------------------------


def chat_messages(prompt: str, answer: str | None = None, system: str = SYSTEM_PROMPT) -> list[dict]:
    """The chat every stage uses: system, user (+ assistant when training)."""
    msgs = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
    if answer is not None:
        msgs.append({"role": "assistant", "content": answer})
    return msgs


def prompt_ids(tokenizer, prompt: str, system: str = SYSTEM_PROMPT) -> list[int]:
    ids = tokenizer.apply_chat_template(chat_messages(prompt, system=system),
                                        add_generation_prompt=True, return_dict=False)
    return list(ids)


@dataclasses.dataclass(frozen=True)
class Sample:
    text: str
    tokens: int
    truncated: bool  # hit max_tokens before an end-of-sequence token


_LOADED: dict[tuple, tuple] = {}


def _adapter_stamp(adapter: str | os.PathLike | None) -> tuple:
    if not adapter:
        return ()
    f = Path(adapter) / "adapters.safetensors"
    st = f.stat() if f.exists() else None
    return (str(Path(adapter).resolve()), st.st_mtime_ns if st else 0, st.st_size if st else 0)


def load_model(model, adapter: str | os.PathLike | None = None):
    """(model, tokenizer) for a registry name or path (+ adapter); the last two loads are cached
    (keyed by path and the adapter file's mtime/size). A (model, tokenizer) pair passes through."""
    if isinstance(model, tuple):
        return model
    from jacrl.models import load, resolve

    key = (str(resolve(model)), _adapter_stamp(adapter))
    if key not in _LOADED:
        if len(_LOADED) >= 2:
            _LOADED.pop(next(iter(_LOADED)))
        _LOADED[key] = load(model, adapter_path=str(adapter) if adapter else None)
    return _LOADED[key]


def generate(model, tokenizer, prompts: Sequence[str], *, n: int = 1, temperature: float = 0.0,
             max_tokens: int = MAX_TOKENS, seed: int = 0, batch_size: int = 32,
             system: str = SYSTEM_PROMPT, progress: str = "") -> list[list[Sample]]:
    """n completions per prompt, decoded in batches of `batch_size` sequences (continuous
    batching, mlx-lm's BatchGenerator). temperature 0 = greedy (argmax). Seeded: the same call
    gives the same samples. progress: a label shows a progress bar over the sequences (stderr)."""
    import mlx.core as mx
    from mlx_lm.generate import BatchGenerator
    from mlx_lm.sample_utils import make_sampler
    from tqdm.auto import tqdm

    if n < 1 or not prompts:
        return [[] for _ in prompts]
    mx.random.seed(seed)
    sampler = make_sampler(temp=temperature)
    ids = [prompt_ids(tokenizer, p, system) for p in prompts]
    jobs = [(i, j) for i in range(len(prompts)) for j in range(n)]
    out: list[list[Sample | None]] = [[None] * n for _ in prompts]
    stops = [[t] for t in tokenizer.eos_token_ids]
    bar = tqdm(total=len(jobs), desc=progress, unit="seq", disable=not progress)
    for start in range(0, len(jobs), batch_size):
        chunk = jobs[start:start + batch_size]
        gen = BatchGenerator(model, stop_tokens=stops, sampler=sampler,
                             completion_batch_size=len(chunk),
                             prefill_batch_size=min(8, len(chunk)))
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
        for (i, j), u in zip(chunk, uids):
            out[i][j] = Sample(tokenizer.decode(toks[u]), len(toks[u]),
                               reason.get(u) == "length")
    bar.close()
    return out  # type: ignore[return-value]


# -------------------------------------------------------------------------------------------
# grading helpers
# -------------------------------------------------------------------------------------------


def _meta(task: dict) -> dict:
    return task.get("meta") or json.loads(task["answer"])


def family_of(task: dict) -> str:
    m = _meta(task)
    return m.get("family") or m["id"].split("_", 1)[0]


def output_similarity(stdout: str, expected: str) -> float:
    return difflib.SequenceMatcher(None, stdout.strip(), expected.strip()).ratio()


def _norm_ws(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


def idiom_count(body: str) -> int:
    return sum(body.count(m) for m in IDIOM_MARKERS)


def _ran(s: Scored) -> bool:
    return s.verdict is not None and s.verdict.ran


def read_task_file(path: str | os.PathLike) -> list[dict]:
    from jacrl.tasks import read_tasks

    return [{"prompt": t["prompt"], "answer": t["answer"]} for t in read_tasks(path)]


def _tasks(tasks) -> list[dict]:
    if tasks is None:
        raise ValueError("evaluate needs tasks: a list of task records or a tasks.jsonl path")
    if isinstance(tasks, (str, os.PathLike)):
        return read_task_file(tasks)
    return list(tasks)


# -------------------------------------------------------------------------------------------
# provenance
# -------------------------------------------------------------------------------------------


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_FILE_HASHES: dict[tuple, str] = {}


def file_sha256(path: Path) -> str:
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _FILE_HASHES:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _FILE_HASHES[key] = h.hexdigest()
    return _FILE_HASHES[key]


def dir_hashes(path: str | os.PathLike, skip_suffixes: tuple[str, ...] = (".md",)) -> dict[str, str]:
    """{relative path: sha256} of every regular file under a model/adapter dir (docs skipped)."""
    root = Path(path)
    return {p.relative_to(root).as_posix(): file_sha256(p)
            for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.startswith(".") and p.suffix not in skip_suffixes}


def dir_hash(path: str | os.PathLike) -> str:
    return sha256_bytes(json.dumps(dir_hashes(path), sort_keys=True).encode())


def data_hash(tasks: Iterable[dict]) -> str:
    """Hash of task records (prompt + answer only, in order)."""
    return sha256_bytes(json.dumps([[t["prompt"], t["answer"]] for t in tasks]).encode())


def code_version() -> str:
    """sha256 over the jacrl package's *.py sources (names and bytes, sorted)."""
    pkg = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for p in sorted(pkg.glob("*.py")):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def git_commit(repo: Path | None = None) -> str:
    """HEAD's commit, read from .git files (no git process); "" outside a checkout. repo: the
    project's root (else the checkout this package was imported from)."""
    if repo is None:
        from jacrl.project import ProjectNotFound, find_root

        try:
            repo = find_root()
        except ProjectNotFound:
            repo = Path(__file__).resolve().parents[1]
    git = repo / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head[5:]
        f = git / ref
        if f.is_file():
            return f.read_text().strip()
        packed = git / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                if line.endswith(" " + ref):
                    return line.split()[0]
    except OSError:
        pass
    return ""


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in ("jaclang", "mlx", "mlx-lm", "mlx-lm-lora"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = ""
    return out


def provenance(model_dir: Path | None, adapter: str | os.PathLike | None, tasks: list[dict]) -> dict:
    return {
        "git_commit": git_commit(),
        "code_version": code_version(),
        **versions(),
        "model_hash": dir_hash(model_dir) if model_dir else "",
        "adapter_hash": dir_hash(adapter) if adapter else "",
        "data_hash": data_hash(tasks),
        "blas": os.environ.get("LD_PRELOAD", ""),
        "time": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


def artifact_key(adapter: str | os.PathLike | None) -> str:
    if not adapter:
        return ""
    m = Path(adapter) / "manifest.json"
    try:
        return json.loads(m.read_text()).get("key", "")
    except (OSError, ValueError):
        return ""


# -------------------------------------------------------------------------------------------
# evaluate
# -------------------------------------------------------------------------------------------


def _pct(x: float, n: int) -> float:
    return round(100.0 * x / n, 2) if n else 0.0


_REF_FIELDS = ("tasks", "k", "runs", "pass1", "greedy_or_k", "near_pass", "norm_pass", "run_pct",
               "pass1_pct", "greedy_or_k_pct", "near_pct", "avg_osim", "avg_idiom", "by_family")
_OURS = ("wilson_lo", "wilson_hi", "pass_at_k", "bestofk", "truncation_pct",
         "sample_truncation_pct", "sample_run_pct")


def check_k(k: Iterable[int], n: int) -> list[int]:
    """The pass@k values as ints, each in 1..n (k = 1 alone with n = 0: the greedy answer); a
    k that the n samples cannot give is an error, never silently dropped."""
    ks = [int(x) for x in k]
    for x in ks:
        if not 1 <= x <= max(n, 1):
            raise ValueError(f"pass@k needs 1 <= k <= n samples per task: got k={x} with n={n}")
    return ks


def grade(tasks: Sequence[dict], greedy: Sequence[Sample | str],
          samples: Sequence[Sequence[Sample | str]] | None = None, *,
          k: Sequence[int] = (1, 2, 4, 8)) -> dict:
    """The metric part of a row from completions already generated: greedy[i] and samples[i]
    (n each, in sample order) for tasks[i]. Strings count as untruncated samples."""
    tasks = list(tasks)

    def as_sample(s):
        return s if isinstance(s, Sample) else Sample(str(s), 0, False)

    greedy = [as_sample(s) for s in greedy]
    samples = [[as_sample(s) for s in ss] for ss in (samples or [[] for _ in tasks])]
    if not (len(tasks) == len(greedy) == len(samples)):
        raise ValueError("tasks, greedy and samples must have one entry per task")
    n = max((len(ss) for ss in samples), default=0)
    if any(len(ss) != n for ss in samples):
        raise ValueError("every task needs the same number of samples")
    answers = [t["answer"] for t in tasks]
    g_scored = score_completions([s.text for s in greedy], answers)
    flat = [(i, s) for i, ss in enumerate(samples) for s in ss]
    s_flat = score_completions([s.text for _, s in flat], [answers[i] for i, _ in flat]) \
        if flat else []
    s_scored: list[list[Scored]] = [[] for _ in tasks]
    for (i, _), sc in zip(flat, s_flat):
        s_scored[i].append(sc)

    ks = sorted({int(x) for x in k if 1 <= int(x) <= n})
    k_row = ks[-1] if ks else 1
    per_task, by_family = [], {}
    runs = pass1 = near = norm = greedy_or_k = truncated = 0
    deploy = coverage = oracle = 0
    osim_sum = idiom_sum = 0.0
    for task, g, gs, ss in zip(tasks, greedy, g_scored, s_scored):
        meta = _meta(task)
        fam = family_of(task)
        expected = meta["expected_output"]
        ran, exact = _ran(gs), gs.exact
        osim = output_similarity(gs.verdict.stdout, expected) if ran else 0.0
        runs += ran
        pass1 += exact
        near += ran and osim >= NEAR
        norm += ran and _norm_ws(gs.verdict.stdout) == _norm_ws(expected)
        osim_sum += osim
        idiom_sum += idiom_count(gs.body) if ran else 0
        truncated += g.truncated
        first_k = ss[:k_row]
        greedy_or_k += exact or any(s.exact for s in first_k)
        dep = None
        if n > 0:
            runner = next((s for s in first_k if _ran(s)), None)  # no look at expected output
            dep = None if runner is None else runner.exact
            coverage += runner is not None
            deploy += bool(dep)
            oracle += any(s.exact for s in first_k)
        fam_count = by_family.setdefault(fam, [0, 0])
        fam_count[0] += exact
        fam_count[1] += 1
        per_task.append({
            "id": meta["id"], "family": fam, "greedy_exact": exact, "greedy_tier": gs.tier,
            "osim": round(osim, 4), "truncated": g.truncated,
            "samples_correct": sum(s.exact for s in ss), "samples_ran": sum(_ran(s) for s in ss),
            "deploy": dep,
        })
    N = len(tasks)
    lo, hi = wilson(pass1, N)
    all_samples = [s for ss in samples for s in ss]
    return {
        "tasks": N, "k": k_row, "runs": runs, "pass1": pass1, "greedy_or_k": greedy_or_k, "near_pass": near,
        "norm_pass": norm, "run_pct": _pct(runs, N), "pass1_pct": _pct(pass1, N),
        "greedy_or_k_pct": _pct(greedy_or_k, N), "near_pct": _pct(near, N),
        "avg_osim": round(osim_sum / N, 4) if N else 0.0,
        "avg_idiom": round(idiom_sum / runs, 2) if runs else 0.0,
        "by_family": by_family,
        "wilson_lo": round(100 * lo, 2), "wilson_hi": round(100 * hi, 2),
        "pass_at_k": {str(kk): round(100 * sum(pass_at_k(n, p["samples_correct"], kk)
                                               for p in per_task) / N, 2) for kk in ks},
        "bestofk": ({"k": k_row, "deploy": deploy, "deploy_pct": _pct(deploy, N),
                     "coverage": coverage, "coverage_pct": _pct(coverage, N),
                     "oracle": oracle, "oracle_pct": _pct(oracle, N)} if n > 0 else None),
        "truncation_pct": _pct(truncated, N),
        "sample_truncation_pct": _pct(sum(s.truncated for s in all_samples), len(all_samples)),
        "sample_run_pct": _pct(sum(_ran(s) for s in s_flat), len(s_flat)),
        "per_task": per_task,
    }


def evaluate(model, adapter: str | os.PathLike | None = None, tasks=None, *, n: int = 0,
             temperature: float = 0.8, k: Sequence[int] = (1, 2, 4, 8), seed: int = 0,
             max_tokens: int = MAX_TOKENS, tag: str = "", split: str = "", kind: str = "",
             batch_size: int = 32, log=None, progress: bool = False) -> dict:
    """Evaluate model (+ adapter) on tasks; returns one result row (see the module docstring).

    model: registry name or model dir (or an already loaded (model, tokenizer) pair, in which case
    pass `adapter` only as a label). tasks: task records or a tasks.jsonl path.
    n: temperature samples per task (0 = greedy only). k: the pass@k values to report (each <= n).
    progress: progress bars over the greedy and sampled sequences (stderr).
    """
    t_all = time.perf_counter()
    tasks = _tasks(tasks)
    if not tasks:
        raise ValueError("no tasks to evaluate")
    from jacrl.reward import reward_isolation

    isolation = reward_isolation()  # refuses here, before loading a model, without a sandbox
    timings: dict[str, float] = {}
    t = time.perf_counter()
    model_dir = None
    if not isinstance(model, tuple):
        from jacrl.models import resolve

        model_dir = resolve(model)
    lm, tok = load_model(model, adapter)
    timings["load"] = time.perf_counter() - t

    prompts = [tt["prompt"] for tt in tasks]
    t = time.perf_counter()
    greedy = [s[0] for s in generate(lm, tok, prompts, n=1, temperature=0.0,
                                     max_tokens=max_tokens, seed=seed, batch_size=batch_size,
                                     progress="greedy" if progress else "")]
    timings["greedy"] = time.perf_counter() - t
    t = time.perf_counter()
    samples = generate(lm, tok, prompts, n=n, temperature=temperature, max_tokens=max_tokens,
                       seed=seed, batch_size=batch_size, progress="samples" if progress else "") \
        if n > 0 else [[] for _ in tasks]
    timings["sample"] = time.perf_counter() - t

    t = time.perf_counter()
    if progress:
        print(f"grading {len(tasks) * (1 + n)} completions", file=sys.stderr, flush=True)
    metrics = grade(tasks, greedy, samples, k=k)
    timings["grade"] = time.perf_counter() - t
    row = {
        "tag": tag, "model": portable(model) if model_dir else "",
        "adapter": portable(adapter) if adapter else "",
        **{kk: metrics[kk] for kk in _REF_FIELDS},
        "split": split, "kind": kind, "n": n, "temperature": temperature if n else 0.0,
        "seed": seed, "max_tokens": max_tokens,
        **{kk: metrics[kk] for kk in _OURS},
        "artifact": artifact_key(adapter),
        "isolation": isolation,
        "provenance": provenance(model_dir, adapter, tasks),
        "seconds": {**{kk: round(v, 2) for kk, v in timings.items()},
                    "total": round(time.perf_counter() - t_all, 2)},
        "per_task": metrics["per_task"],
    }
    if log:
        log(format_row(row))
    return row


def format_row(row: dict) -> str:
    """A short human summary of one row."""
    lines = [f"model {row['model']}" + (f" + {row['adapter']}" if row["adapter"] else " (base)"),
             f"tasks {row['tasks']}  n={row['n']} T={row['temperature']} seed={row['seed']}"
             f"  max_tokens={row['max_tokens']}" + (f"  tag={row['tag']}" if row["tag"] else "")]
    table = [("runs", f"{row['run_pct']:.1f}%"),
             ("pass@1 (greedy)", (f"{row['pass1_pct']:.1f}%  [95% CI {row['wilson_lo']:.0f}-"
                                  f"{row['wilson_hi']:.0f}%]  ({row['pass1']}/{row['tasks']})")),
             ("near pass", f"{row['near_pct']:.1f}%"),
             ("avg osim", f"{row['avg_osim']:.3f}"),
             ("truncated", f"{row['truncation_pct']:.1f}%")]
    for kk, v in row["pass_at_k"].items():
        table.append((f"pass@{kk} (unbiased)", f"{v:.1f}%"))
    if row["n"]:
        table.append((f"greedy or any of {row['k']}", f"{row['greedy_or_k_pct']:.1f}%"))
    b = row.get("bestofk")
    if b:
        table.append((f"best-of-{b['k']} deploy",
                      (f"{b['deploy_pct']:.1f}%  (coverage {b['coverage_pct']:.1f}%, oracle "
                       f"{b['oracle_pct']:.1f}%)")))
    width = max(len(a) for a, _ in table)
    lines += [f"  {a:<{width}}  {v}" for a, v in table]
    fams = "  ".join(f"{f}: {p}/{t}" + (" (anecdote)" if t <= 2 else "")
                     for f, (p, t) in sorted(row["by_family"].items()))
    lines.append(f"  by family: {fams}")
    return "\n".join(lines)


# -------------------------------------------------------------------------------------------
# result rows: append-only JSONL
# -------------------------------------------------------------------------------------------


def append_row(path: str | os.PathLike, row: dict) -> None:
    """Append one row as one line: a single write + fsync. A torn last line left by an earlier
    crash is closed with a newline first, so this row starts on its own line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(row, ensure_ascii=False) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size:
            with open(path, "rb") as f:
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    data = b"\n" + data
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(f"short write to {path}: {written} of {len(data)} bytes")
        os.fsync(fd)
    finally:
        os.close(fd)


def read_rows(path: str | os.PathLike) -> list[dict]:
    """All rows of a results file; unparseable lines (a torn write) are skipped with a warning."""
    rows = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    last = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError:
            where = "torn last line" if i == last else f"unparseable line {i + 1}"
            warnings.warn(f"{path}: ignoring {where} (an interrupted write?)", stacklevel=2)
    return rows


# -------------------------------------------------------------------------------------------
# deployable generator
# -------------------------------------------------------------------------------------------


def generate_best_of_k(model, adapter: str | os.PathLike | None, task_or_prompt, k: int = 8,
                       temperature: float = 0.8, *, seed: int = 0,
                       max_tokens: int = MAX_TOKENS, timeout: float = 20.0,
                       progress: bool = False) -> dict:
    """Sample k completions; return the first (in sample order) that the Jac toolchain accepts —
    for a task (a record with `answer`): spliced into its template, it runs (exit 0); for a bare
    prompt: the code block itself runs. No look at the expected output.

    Returns {"accepted", "index" (None if none accepted), "body", "completion", "stdout", "k"};
    when nothing is accepted, the first sample's body with accepted False.
    """
    from jacrl.extract import code_blocks
    from jacrl.reward import default_executor

    lm, tok = load_model(model, adapter)
    is_task = isinstance(task_or_prompt, dict)
    prompt = task_or_prompt["prompt"] if is_task else str(task_or_prompt)
    samples = generate(lm, tok, [prompt], n=k, temperature=temperature, max_tokens=max_tokens,
                       seed=seed, progress="samples" if progress else "")[0]
    texts = [s.text for s in samples]
    if is_task:
        scored = score_completions(texts, [task_or_prompt["answer"]])
        bodies = [s.body for s in scored]
        verdicts = [s.verdict for s in scored]
    else:
        bodies = [code_blocks(t)[0].strip("\n") for t in texts]
        verdicts = default_executor().run_many(bodies, timeout=timeout)
    for i, (b, v) in enumerate(zip(bodies, verdicts)):
        if b.strip() and v is not None and v.ran:
            return {"accepted": True, "index": i, "body": b, "completion": texts[i],
                    "stdout": v.stdout, "k": k}
    return {"accepted": False, "index": None, "body": bodies[0] if bodies else "",
            "completion": texts[0] if texts else "", "stdout": "", "k": k}


# -------------------------------------------------------------------------------------------
# CLI: `jacrl eval`, `jacrl generate`
# -------------------------------------------------------------------------------------------


def _int_list(s: str) -> list[int]:
    try:
        return [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"-k expects comma-separated integers, got {s!r}") from None


def load_tasks_arg(tasks: str | None, split: str | None,
                   data_dir: str | None) -> tuple[list[dict], str]:
    """Tasks from --tasks FILE or --split NAME (jacrl.splits, imported lazily)."""
    if tasks:
        return read_task_file(tasks), Path(tasks).stem
    if split:
        from jacrl import splits

        return [{"prompt": t["prompt"], "answer": t["answer"]}
                for t in splits.load_split(split, data_dir=data_dir)], split
    raise ValueError("give --split NAME or --tasks FILE")


def add_eval_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--model", default="jac-tiny", help="registry name or MLX model dir")
    p.add_argument("--adapter", default=None, help="LoRA adapter dir, e.g. an artifact dir "
                   "(default: none, the base model)")
    p.add_argument("--split", default=None, help="split name from data/splits, e.g. holdout "
                   "(default: none; give --split or --tasks)")
    p.add_argument("--tasks", default=None, help="a tasks.jsonl file instead of --split "
                   "(default: none)")
    p.add_argument("--data-dir", default=None, help="the data dir (default: the project's data/)")
    p.add_argument("--limit", type=int, default=0, help="first N tasks only (0 = all)")
    p.add_argument("-n", "--samples", type=int, default=0, help="temperature samples per task")
    p.add_argument("--temperature", type=float, default=0.8, help="sampling temperature")
    p.add_argument("-k", default=None, help="pass@k values, comma-separated, each <= n (default: "
                   "those of 1,2,4,8 that are <= n)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    p.add_argument("--max-tokens", type=int, default=MAX_TOKENS, help="completion budget")
    p.add_argument("--batch-size", type=int, default=32, help="sequences decoded together")
    p.add_argument("--tag", default="", help="row label")
    p.add_argument("--kind", default="", help="row label, e.g. gen or mem")
    p.add_argument("--out", default=None, help="results JSONL to append the row to (default: "
                   "results/eval/eval.jsonl in the project, never the ladder's rows; '' = none)")
    p.add_argument("--json", action="store_true", help="print the row as JSON too")
    return p


def _eval_out(out: str | None) -> str:
    """Where the row goes ("" = nowhere): the path given, else the project's eval rows; never
    the ladder's own rows, whose cells are keyed."""
    from jacrl.project import ProjectNotFound, project

    if out == "":
        return ""
    try:
        proj = project()
    except ProjectNotFound:
        if out is None:
            raise
        return out
    if out is not None and Path(out).resolve() == proj.rows.resolve():
        raise ValueError(f"--out {out} is the ladder's own rows file; eval rows go elsewhere "
                         f"(default: {proj.rel(proj.eval_rows)})")
    return out if out is not None else str(proj.eval_rows)


def run_eval(args: argparse.Namespace) -> int:
    """Evaluate a model (+ adapter) on a split or tasks file; print the row and append it."""
    from jacrl.models import resolve

    n = args.samples
    if n < 0:
        raise ValueError(f"-n must be >= 0, got {n}")
    ks = check_k(_int_list(args.k), n) if args.k is not None else [x for x in (1, 2, 4, 8)
                                                                     if x <= n]
    out = _eval_out(args.out)
    resolve(args.model)  # an unknown model fails before any work
    tasks, split = load_tasks_arg(args.tasks, args.split, args.data_dir)
    if args.limit:
        tasks = tasks[:args.limit]
    row = evaluate(args.model, args.adapter, tasks, n=n, temperature=args.temperature, k=ks,
                   seed=args.seed, max_tokens=args.max_tokens, tag=args.tag, split=split,
                   kind=args.kind, batch_size=args.batch_size, progress=True)
    print(format_row(row))
    if args.json:
        print(json.dumps({k: v for k, v in row.items() if k != "per_task"}))
    if out:
        append_row(out, row)
        print(f"appended to {out}")
    return 0


def add_generate_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("--model", default="jac-tiny", help="registry name or MLX model dir")
    p.add_argument("--adapter", default=None, help="LoRA adapter dir (default: none, the base "
                   "model)")
    p.add_argument("--id", default=None, help="task id: splice into its template, must run "
                   "(default: none; a free prompt)")
    p.add_argument("--tasks", default=None,
                   help="where --id is looked up (default: the project's data/tasks.jsonl)")
    p.add_argument("--prompt", default=None, help="free prompt (default: stdin when no --id)")
    p.add_argument("-k", type=int, default=8, help="samples drawn; the first that runs is shown")
    p.add_argument("--temperature", type=float, default=0.8, help="sampling temperature")
    p.add_argument("--seed", type=int, default=0, help="sampling seed")
    p.add_argument("--max-tokens", type=int, default=MAX_TOKENS, help="completion budget")
    return p


def run_generate(args: argparse.Namespace) -> int:
    """Best-of-k: print the first of k samples that runs (exit 1 when none does)."""
    from jacrl.models import resolve
    from jacrl.project import path_or

    if args.k < 1:
        raise ValueError(f"-k must be >= 1, got {args.k}")
    resolve(args.model)  # an unknown model fails before any work
    if args.id:
        path = path_or(args.tasks, "tasks")
        found = [t for t in read_task_file(path) if _meta(t)["id"] == args.id]
        if not found:
            raise ValueError(f"{path}: no task {args.id!r}")
        what = found[0]
    else:
        what = args.prompt if args.prompt is not None else sys.stdin.read()
    r = generate_best_of_k(args.model, args.adapter, what, args.k, args.temperature,
                           seed=args.seed, max_tokens=args.max_tokens, progress=True)
    if r["accepted"]:
        print(f"# verified: sample {r['index'] + 1} of {r['k']} runs", file=sys.stderr)
        if r["stdout"]:
            print(r["stdout"], file=sys.stderr, end="" if r["stdout"].endswith("\n") else "\n")
    else:
        print(f"# warning: none of {r['k']} samples ran; showing the first", file=sys.stderr)
    print(r["body"])
    return 0 if r["accepted"] else 1


def add_cli(subparsers) -> None:
    """Register `eval` and `generate` on an argparse subparsers object (for jacrl.cli)."""
    p = subparsers.add_parser("eval", help="evaluate a model (+adapter) and append a result row",
                              description=run_eval.__doc__)
    add_eval_arguments(p).set_defaults(func=run_eval)
    p = subparsers.add_parser("generate", help="best-of-k generation verified by the Jac runtime",
                              description=run_generate.__doc__)
    add_generate_arguments(p).set_defaults(func=run_generate)
