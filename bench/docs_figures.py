"""The benchmark figures the docs quote, written from the benches' recorded JSON, never by hand.

A figure in a doc (docs/*.md, README.md) is a generated region (`jacrl.doc_regions`):
`<!-- generated:NAME -->` ... `<!-- /generated:NAME -->`, inline in a sentence or a block (a
table); its text is `FIGURES[NAME]` applied to bench/results/NAME.json. A bench that records
NAME.json calls `recorded(path)` right after, so the docs say what its last run measured;
tests/test_docs.py fails when a doc's figure differs from its rendering.

    .venv/bin/python bench/docs_figures.py           # rewrite every figure from the JSON
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
sys.path.insert(0, str(ROOT))

from jacrl.doc_regions import regions_in, write_region  # noqa: E402


def _reward_throughput(d: dict) -> str:
    ratio, n = d["throughput_ratio"], d["n"]
    same, total = d["agreement"]["same"], d["agreement"]["total"]
    return (
        f"**{ratio['set']:.1f}x** warm `jac run` with the {n['looping']} looping programs "
        f"included, **{ratio['set_nl']:.1f}x** without them, agreement {same}/{total} "
        f"(load {d['load_start'][0]:.1f} at the start)"
    )


def _grpo_step_reward(d: dict) -> str:
    r = d["reward"]
    task, fixed = r["task"], r["fixed_20s"]
    return (
        f"{r['rollouts']} rollouts with {r['looping']} that loop forever: {task['seconds']:.2f} s "
        f"with the tasks' {task['timeout_s'][0]:g} s time-outs, {fixed['seconds']:.2f} s with the "
        f"earlier fixed {fixed['timeout_s'][0]:g} s ({fixed['seconds'] / task['seconds']:.1f}x)"
    )


DECODE_GOAL = 150  # tok/s, a real model's aggregate batched decode on 2 cores (issue 48)
EVAL_SPEEDUP_GOAL = 3  # an evaluation's batched generation against the per-chunk one (issue 57)


def _real_model_speed(record: dict) -> str:
    """The table docs/real-model.md shows (bench/real_model_speed.py's run)."""
    h = record["host"]
    group = next(
        (m["group_prefill"]["group"] for m in record["models"] if "group_prefill" in m), "·"
    )
    lines = [
        f"Host: {h['cpu']}, {h['cores']} cores, BLAS {h['blas']} ({h['blas_threads']} threads); "
        f"load average {h['load_before']} before, {h.get('load_after')} after.",
        "",
        "| model | prefill tok/s | decode tok/s b1 | b8 | b32 | b64 | shared prompt (x"
        f"{group} prefill) | LoRA step | GRPO-like step |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m in record["models"]:
        if "decode_tok_s" not in m:  # prefill only (bf16)
            lines.append(f"| {m['model']} | {m['prefill_tok_s']} | · | · | · | · | · | · | · |")
            continue
        d = m["decode_tok_s"]
        lines.append(
            f"| {m['model']} | {m['prefill_tok_s']} | {d['1']} | {d['8']} | {d['32']} | "
            f"{d['64']} | {m['group_prefill']['saving']}x | {m['lora_step_s']['s']} s "
            f"({m['lora_step_s']['shape']}) | {m['grpo_like_step_s']['s']} s |"
        )
    real = [m for m in record["models"] if m["model"] != "jac-tiny" and "decode_tok_s" in m]
    if real:
        best = max(real, key=lambda m: max(m["decode_tok_s"].values()))
        b, rate = max(best["decode_tok_s"].items(), key=lambda kv: kv[1])
        lines += [
            "",
            f"Goal, aggregate batched decode >= {DECODE_GOAL} tok/s on this host: "
            f"{'MET' if rate >= DECODE_GOAL else 'NOT met'} (best: {best['model']}, {rate} "
            f"tok/s at batch {b}). Rows marked · were not measured (bf16: prefill only).",
        ]
    return "\n".join(lines + _evaluation(record)) + "\n"


def _evaluation(record: dict) -> list[str]:
    """The evaluation rows under the speed table: jacrl's batched generation beside the per-chunk
    baseline, measured in the same run (none in a record from before issue 57)."""
    evs = [(m["model"], m["evaluation"]) for m in record["models"] if "evaluation" in m]
    if not evs:
        return []
    e = evs[0][1]
    w = next((e["split"]["workers"] for _, e in evs if "split" in e), None)
    lines = [
        "",
        f"An evaluation's generation: {e['tasks']} tasks x (greedy + {e['n']} samples), budgets "
        f"at factor {e['budget_factor']}, batch {e['batch_size']}; per-chunk (before issue 57), "
        "batched (one continuous batch, one process)"
        + (f" and split ({w} worker processes of one BLAS thread, `decode_workers`)" if w else "")
        + " in the same run; tok/s = new tokens over generation wall, prefill included; decode "
        "tok/s = tokens decoded over the decode phase (after prefill; split: the workers' rates "
        "added, and all tokens over the slowest worker's phase); prefill / decode s: the batched "
        "path's, and each split worker's (after loading the model).",
        "",
        "| model | per-chunk s | batched s | split s | speedup batched / split | per-chunk tok/s "
        "| batched tok/s | split tok/s | prefill / decode s | decode tok/s batched / split "
        "| greedy answers equal |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, e in evs:
        sp, b = e.get("split"), e["batched"]
        phases = f"{b['prefill_s']} / {b['decode_s']}" if "decode_s" in b else "·"
        if sp and "per_worker" in sp:
            phases += "; " + ", ".join(
                f"{w['prefill_s']} / {w['decode_s']}" for w in sp["per_worker"]
            )
        rates = f"{b.get('decode_tok_s', '·')} / " + (
            f"{sp['decode_tok_s']} ({sp['decode_tok_s_slowest']})"
            if sp and "decode_tok_s" in sp
            else "·"
        )
        lines.append(
            f"| {name} | {e['per_chunk']['s']} | {b['s']} | "
            f"{sp['s'] if sp else '·'} | {e['speedup']}x / "
            f"{str(e['split_speedup']) + 'x' if sp else '·'} | {e['per_chunk']['tok_s']} | "
            f"{b['tok_s']} | {sp['tok_s'] if sp else '·'} | {phases} | {rates} | "
            f"{e['greedy_same']}/{e['tasks']}"
            + (f", {e['split_greedy_same']}/{e['tasks']}" if sp else "")
            + " |"
        )
    real = [e for name, e in evs if name != "jac-tiny"]
    if real:

        def best(e: dict) -> tuple[float, float]:  # (speedup, decode tok/s) of its faster path
            if "split" in e and e["split"]["s"] < e["batched"]["s"]:
                sp = e["split"]
                return e["split_speedup"], sp.get("decode_tok_s_slowest", sp["tok_s"])
            return e["speedup"], e["batched"].get("decode_tok_s", e["batched"]["tok_s"])

        fast = all(best(e)[0] >= EVAL_SPEEDUP_GOAL for e in real)
        decode = all(best(e)[1] >= DECODE_GOAL for e in real)
        lines += [
            "",
            f"Goals on this host: an evaluation >= {EVAL_SPEEDUP_GOAL}x faster than per-chunk: "
            f"{'MET' if fast else 'NOT met'} (best path: "
            f"{', '.join(f'{x}x' for x, _ in map(best, real))}); decode inside it >= "
            f"{DECODE_GOAL} tok/s: {'MET' if decode else 'NOT met'} (the conservative figure, "
            f"all tokens over the slowest worker's decode phase: "
            f"{', '.join(f'{y} tok/s' for _, y in map(best, real))}).",
        ]
    return lines


def _learnable_baseline(d: dict) -> str:
    h, p = d["holdout"], d["trainpool"]
    lines = [
        f"Rewrite baseline ({d['rules']} regular expressions, no model): holdout "
        f"**{h['exact']}/{h['tasks']}** exact, train pool {p['exact']}/{p['tasks']} (load "
        f"{d['load_start'][0]:.1f} at the start).",
        "",
        "| rung | train tasks | shapes | templates (shape, combination) | holdout tasks whose "
        "shape it trains | whose template it trains |",
        "|---|---|---|---|---|---|",
    ]
    for rung, c in d["coverage"].items():
        lines.append(
            f"| {rung} | {c['train_tasks']} | {c['shapes']} | {c['templates']} | "
            f"{c['holdout_shape_covered']}/64 | {c['holdout_template_covered']}/64 |"
        )
    split = d.get("smollm2_passes_by_coverage") or {}
    if split:
        lines += [
            "",
            "| SmolLM2 cell | greedy passes where the rung trains the shape | where it does not |",
            "|---|---|---|",
        ]
        for cell, s in split.items():
            (a, n), (b, m) = s["covered"], s["not covered"]
            lines.append(f"| {cell} | {a}/{n} | {b}/{m} |")
    return "\n".join(lines) + "\n"


def _lora_cost(d: dict) -> str:
    host = d["host"]
    lines = [
        f"{d['model']}, batch {d['batch']}, {d['steps']} timed steps per arm, arms interleaved; "
        f"host BLAS {host.get('openblas_core') or 'bundled'} x{host.get('threads')}, load "
        f"{d['load_start'][0]:.1f} -> {d['load_end'][0]:.1f} (another run beside it).",
        "",
        "| arm | s / step | real tokens / step | padding | real tok/s | vs default "
        "| loss, last third |",
        "|---|---|---|---|---|---|---|",
    ]
    for a in d["arms"]:
        lines.append(
            f"| {a['arm']} | {a['s_per_step']:.2f} | {a['real_tokens_per_step']:.0f} | "
            f"{100 * a['padding_share']:.0f} % | {a['real_tok_per_s']:.1f} | x{a['speedup']:.2f} | "
            f"{a['loss_last_third']:.3f} |"
        )
    return "\n".join(lines) + "\n"


# NAME (bench/results/NAME.json) -> its figure's text
def _job_cost(d: dict) -> str:
    """bench/job_cost.py's table: each part's CPU and what the bounds leave a job."""
    parts, total, budget = d["parts_ms"], d["sum_ms"], d["bounds_budget_ms"]
    lines = [
        f"{d['measured']} of {d['programs']} programs, a process warmed as the zygote is "
        f"({d['warmed_rss_mb']} MB), {d['cpus']} cores, load {d['load_start'][0]} at the start.",
        "",
        "| part | CPU, child (ms) | CPU, forking side (ms) |",
        "|---|---|---|",
        *(f"| {k} | {v['child_ms']} | {v['parent_ms']} |" for k, v in parts.items()),
        "",
        "| a sandboxed job | ms of CPU |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in total.items()),
        f"| what 20x with the looping programs leaves a job | {budget['with_loops_20x_ms']} |",
        f"| what 35x without them leaves a job | {budget['without_loops_35x_ms']} |",
    ]
    return "\n".join(lines) + "\n"


def _grpo_signal_formulas(d: dict) -> str:
    """bench/grpo_signal_formulas.py's table: a run's groups with signal under each formula."""
    own = d.get("run")
    lines = [
        f"{d['n_rollouts']} rollouts of `{d['rollouts']}`"
        + (
            f"; the run trained on `{own['formula']}` at span {own['min_group_span']} and "
            f"recorded {own['signal_steps']} steps with signal"
            if own
            else " (a run in progress: no manifest yet)"
        )
        + ".",
        "",
        "| formula | min_group_span | steps with signal | mean group span | mean reward |",
        "|---|---|---|---|---|",
        *(
            f"| {r['formula']} | {r['min_group_span']} | {r['steps_with_signal']}/{r['steps']} "
            f"| {r['mean_span']} | {r['mean_reward']} |"
            for r in d["table"]
        ),
    ]
    return "\n".join(lines) + "\n"


FIGURES: dict[str, Callable[[dict], str]] = {
    "reward_throughput": _reward_throughput,
    "grpo_step": _grpo_step_reward,
    "real_model_speed": _real_model_speed,
    "learnable_baseline": _learnable_baseline,
    "lora_cost": _lora_cost,
    "job_cost": _job_cost,
    "grpo_signal_formulas": _grpo_signal_formulas,
    "grpo_signal_formulas_learnable": _grpo_signal_formulas,
}


def docs(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def render(name: str, results: Path = RESULTS) -> str:
    path = results / f"{name}.json"
    try:
        return FIGURES[name](json.loads(path.read_text()))
    except (OSError, ValueError, KeyError) as e:
        raise ValueError(f"{path}: cannot render figure {name!r} ({type(e).__name__}: {e})") from e


def quoted(root: Path = ROOT) -> dict[str, list[tuple[Path, str]]]:
    """{NAME: [(doc, the figure's text there)]} of every figure the docs quote."""
    return {
        name: [(doc, text) for doc in docs(root) for text in regions_in(doc, name)]
        for name in FIGURES
    }


def write(name: str, root: Path = ROOT, results: Path = RESULTS) -> list[Path]:
    """Rewrite figure NAME wherever a doc quotes it; the docs changed."""
    text = render(name, results)
    return [doc for doc in docs(root) if regions_in(doc, name) and write_region(doc, name, text)]


def recorded(path: Path) -> list[Path]:
    """A bench just wrote its JSON at `path`: when that is a figure's record (bench/results/
    NAME.json), rewrite the docs that quote it; the docs changed."""
    path = Path(path).resolve()
    if path.parent != RESULTS or path.stem not in FIGURES:
        return []
    changed = write(path.stem)
    for doc in changed:
        print(f"{doc.relative_to(ROOT)}: figure {path.stem} rewritten from {path.name}")
    return changed


if __name__ == "__main__":
    for name in FIGURES:
        print(name, [str(p.relative_to(ROOT)) for p in write(name)])
