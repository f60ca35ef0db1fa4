"""The demo: tasks and splits if missing, a small ladder on a real pretrained model (SmolLM2-135M:
the learnable family's whole holdout, base and sft at rungs 1 and 10) or on jac-tiny (rungs 1
and 3, three conditions), its table and figures, beside the committed reference rows, in minutes
on a CPU."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from jacrl.conditions import CONDITIONS, DEFAULT_CONDITIONS
from jacrl.ladder.plan import plan
from jacrl.ladder.run import run, show
from jacrl.ladder.settings import LadderConfig, from_env, validate
from jacrl.models.registry import resolve
from jacrl.project import ROWS_FILE, figures_for, path_or
from jacrl.results import read_rows
from jacrl.tasks import build, splits

# jac-tiny is a 4M-parameter test fixture, not a recipe for real models. The demo's SFT is sized
# so its plumbing gate is visible: greedy decoding must reproduce the trained gold bodies (mem).
# Measured on 2 CPU cores with OpenBLAS (seeds 0 and 1): LoRA rank 64 on every linear layer of all
# 4 blocks, constant LR 2e-4, batch 1 reproduces rung 1's body from iteration 50-60 and all 3 of
# rung 3's from 240 (2/3 from 210 with seed 0); LR >= 4e-4, or rank 128 at 2e-4, diverges. So 90
# iterations per rung task: 90 on rung 1, 270 on rung 3 (~0.5-0.7 s each). Evaluation and GRPO
# rollouts get 256 tokens: the longest rung-3 gold answer is 249 tokens + the end token. GRPO at
# the settings bench/grpo_learning.py measured on rung 3 (docs/training.md): LR 5e-6, groups of 4,
# the rollout temperature calibrated on the SFT adapter, centred advantages, groups spanning
# < 0.1 skipped: 24 steps raised sampled pass@1 on the rung's tasks, p < 0.05; at LR 2e-5 (and
# 1e-5 with σ-normalised advantages, the earlier default) the same steps undid what SFT taught.
DEMO_SFT = {
    "learning_rate": 2e-4,
    "warmup": 0,
    "decay_steps": 10**9,
    "lora_layers": -1,
    "lora_rank": 64,
    "grad_checkpoint": False,
    "batch_size": 1,
    "steps_per_report": 10,
    "steps_per_eval": 10**6,
    "val_batches": 1,
}
DEMO_GRPO = {
    "learning_rate": 5e-6,
    "group_size": 4,
    "max_completion_length": 256,
    "max_seq_length": 2048,
    "lora_layers": -1,
    "lora_rank": 8,
    "grad_checkpoint": False,
    "steps_per_report": 1,
}


# raw_grpo (GRPO on the base) is left out: on jac-tiny it is 0 everywhere, and its two cells
# (~170 s) kept `make demo` over 10 minutes (665 s measured); the recipe still runs it on rung 1
DEMO_CONDITIONS = tuple(c for c in DEFAULT_CONDITIONS if c != "raw_grpo")


def demo_config(**over) -> LadderConfig:
    base = LadderConfig(
        rungs=("1", "3"),
        models=("jac-tiny",),
        conditions=DEMO_CONDITIONS,
        sft_iters=270,
        sft_iters_per_task=90,
        grpo_iters=8,
        sets={"sft": dict(DEMO_SFT), "grpo": dict(DEMO_GRPO)},
        gen_limit=6,
        n=4,
        k=(1, 2, 4),
        max_tokens=256,
    )
    return dataclasses.replace(base, **over)


# The real model's demo (`make demo`): SmolLM2-135M on the learnable family, where the question has
# a visible answer on this CPU — gen rises from rung 1 to rung 10 because rung 10's tasks show 7 of
# the 8 shapes and rung 1's one (docs/real-model.md: what the family measures). Every holdout
# task (64); base and sft only: on these rungs GRPO on the rung's own tasks has no learning
# signal (the SFT policy passes every rollout), and GRPO that has one (`make real-grpo`) takes
# an hour a cell. SFT as `make real-ladder` runs it (40 iterations at lr 1e-4).
REAL_DEMO_MODEL = "smollm2-135m"
REAL_DEMO_SFT = {
    "learning_rate": 1e-4,
    "warmup": 4,
    "decay_steps": 200,
    "grad_checkpoint": False,
    "val_batches": 2,
    "steps_per_eval": 20,
}


def real_demo_config(**over) -> LadderConfig:
    """The real model's demo ladder (see REAL_DEMO_SFT's comment); its data dir is the project's
    learnable family unless `data_dir` is given (the CLI's help passes "": no project needed)."""
    if "data_dir" not in over:
        over["data_dir"] = str(path_or(None, "learnable") / "data")
    base = LadderConfig(
        rungs=("1", "10"),
        models=(REAL_DEMO_MODEL,),
        conditions=("base", "sft"),
        sft_iters=40,
        sets={"sft": dict(REAL_DEMO_SFT)},
        gen_limit=0,
        n=4,
        k=(1, 2, 4),
        temperature=0.7,
        budget_factor=1.5,
        decode_workers=2,  # two one-thread decoders on the 2 cores (jacrl.generate.decode_split)
    )
    return dataclasses.replace(base, **over)


def config_for(model: str, **over) -> LadderConfig:
    """The demo ladder of `model`: jac-tiny's (`demo_config`) or the real model's."""
    return (demo_config if model == "jac-tiny" else real_demo_config)(models=(model,), **over)


def reference_for(model: str) -> Path:
    """The committed rows a demo of `model` is compared with: jac-tiny's results/rl_ladder.jsonl,
    another model's results/demo-<model>/rl_ladder.jsonl (`make demo-reference` remakes it)."""
    results = path_or(None, "results")
    return results / ROWS_FILE if model == "jac-tiny" else results / f"demo-{model}" / ROWS_FILE


def reference_problem(rows: Sequence[Mapping], cfg: LadderConfig) -> str:
    """Why committed reference `rows` cannot be compared like with like with a demo of `cfg`
    run now ("" when they can): rows under keys the demo no longer plans (other code or
    settings), planned cells without rows, or a cell with other than its two rows."""
    planned = {c.key: c.name for c in plan(cfg)}
    made = [r.get("cell_key") for r in rows]
    stale = sorted(set(made) - set(planned))
    missing = sorted(name for key, name in planned.items() if key not in made)
    twice = sorted({k for k in made if made.count(k) != 2} - set(stale))
    if not (stale or missing or twice):
        return ""
    return (
        f"rows under keys the demo no longer plans (other code or settings): {stale}; "
        f"cells without rows: {missing}; cells without exactly a gen and a mem row: {twice}"
    )


def training_runs(
    cfg: LadderConfig,
    statuses: Sequence[Mapping] | None = None,
) -> list[tuple[str, Path]]:
    """(label, metrics file) of the last rung's trained cells of the first model, from the copies
    `run_cell` keeps in each cell's directory: the sft cell's SFT, then each GRPO condition's GRPO
    stage (sft_grpo's SFT stage is the sft cell's artifact). The cells are `statuses` (what `run`
    returned: the keys it ran or skipped), else `plan(cfg)`'s. Cells without one are left out."""
    cfg = validate(cfg)
    if statuses is None:
        statuses = [{"key": c.key, "cell": c.name} for c in plan(cfg)]
    cells = [
        (s["key"], *s["cell"].split("/"))
        for s in statuses
        if s.get("key") and len(s.get("cell", "").split("/")) == 3
    ]
    cells = [c for c in cells if c[1] == f"r{cfg.rungs[-1]}"]
    out = []
    for key, rung, label, cond in cells:
        c = CONDITIONS.get(cond)
        stage = c.last if c is not None else None
        path = Path(cfg.results_dir) / "cells" / key / f"metrics-{stage}.jsonl" if stage else None
        if label == cells[0][2] and path is not None and path.is_file():
            out.append((f"{rung} {cond} ({stage.upper()})", path))
    return out


def ensure_data(
    data_dir: str | os.PathLike | None = None,
    drivers: str | os.PathLike | None = None,
    log: Callable[[str], None] = print,
) -> None:
    """Build tasks.jsonl (slow: every driver runs) and splits/ when missing (defaults: the
    project's data/ and drivers/)."""
    d, drivers = path_or(data_dir, "data"), path_or(drivers, "drivers")
    if not (d / "tasks.jsonl").is_file():
        log(f"building tasks from {drivers}/ into {d}/ (runs every driver; a few minutes)")
        rep = build.build_tasks(drivers, d, progress=True)
        for line in rep.failures:
            log(line)
        if rep.failures:
            raise ValueError(
                f"task build failed: {len(rep.failures)} driver(s) rejected (listed "
                "above), nothing written"
            )
    if not all((d / "splits" / f"{s}.jsonl").is_file() for s in splits.SPLITS):
        log(f"building splits in {d}/splits")
        splits.build_splits(d)


def _measures(r: Mapping) -> dict[str, str]:
    """What the demo's table shows of one evaluation: greedy and sampled pass@1, run %, the
    sampling temperature (mem: the rollout temperature GRPO calibrated)."""
    sampled = (r.get("pass_at_k") or {}).get("1")
    return {
        "greedy": f"{r['pass1']}/{r['tasks']}",
        "sampled": "-" if sampled is None else f"{sampled:.0f}%",
        "run": f"{r['run_pct']:.0f}%",
        "T": f"{r.get('temperature', 0):g}",
    }


def _host(r: Mapping) -> str:
    """The BLAS kernel family and thread count a row was computed with ("" when not recorded)."""
    pv = r.get("provenance") if isinstance(r.get("provenance"), Mapping) else {}
    return f"{pv['blas_core']} x{pv.get('blas_threads', '?')}" if pv.get("blas_core") else ""


def compare_rows(reference: list[dict], fresh: list[dict]) -> str:
    """The fresh rows beside the reference's, one line per evaluation tag: greedy pass@1,
    sampled pass@1, run % and T of each, whether the cell keys match, and for what moved, why:
    training noise (the same artifact key) or changed inputs (`provenance.rows_verdict`), and
    the host's BLAS kernel family or thread count where they differ from the reference's (the
    same key trains other weights under other numerics). Ends with one summary line."""
    from jacrl.provenance import rows_verdict

    ref = {r["tag"]: r for r in reference}
    fmt = lambda m: " ".join(f"{k} {v}" for k, v in m.items())  # noqa: E731
    lines = [f"{'evaluation':28} reference -> this run (greedy, sampled pass@1, run %, T)"]
    moved, hosts = [], set()
    for r in fresh:
        old, now = ref.get(r["tag"]), _measures(r)
        if old is None:
            lines.append(f"{r['tag']:28} (no reference row) -> {fmt(now)}")
            continue
        was = _measures(old)
        diff = [k for k in now if now[k] != was[k]]
        key = "same key" if old.get("cell_key") == r.get("cell_key") else "other key"
        why = [rows_verdict(old, r) or ("same adapter" if r.get("adapter") else "")]
        if _host(old) and _host(r) and _host(old) != _host(r):  # rows before: not recorded
            hosts.add(f"reference {_host(old)}, here {_host(r)}")
            why.append("other BLAS")
        text = fmt(was) + (f" -> {', '.join(f'{k} {now[k]}' for k in diff)}" if diff else " (same)")
        lines.append(f"{r['tag']:28} {text}; {key}" + "".join(f"; {w}" for w in why if w))
        if diff:
            moved.append(f"{r['tag']} {'/'.join(diff)} ({key}, {', '.join(w for w in why if w)})")
    same = len(fresh) - len(moved)
    lines.append(
        f"{same} of {len(fresh)} evaluations match the reference in greedy and sampled "
        f"pass@1, run % and T"
        + (f"; moved: {'; '.join(moved)}" if moved else "")
        + (f"; BLAS kernel family / threads: {' | '.join(sorted(hosts))}" if hosts else "")
    )
    return "\n".join(lines)


def fresh_results_dir() -> str:
    """results/demo/<UTC time>: where `jacrl demo` writes unless told (gitignored)."""
    return str(path_or(None, "results") / "demo" / time.strftime("%Y%m%d-%H%M%S", time.gmtime()))


def demo(
    results_dir: str = "",
    figures_dir: str = "",
    data_dir: str = "",
    artifacts_dir: str = "",
    model: str = REAL_DEMO_MODEL,
    log: Callable[[str], None] = print,
) -> dict:
    """Tasks/splits if needed; the demo ladder of `model` (`config_for`: SmolLM2 on the learnable
    family, rungs 1 and 10, base and sft; jac-tiny: rungs 1 and 3, base, sft, sft_grpo);
    the table; ladder.png (+ ladder_passk.png) and training.png (the last rung's SFT and GRPO
    curves, `training_runs`), each with its rows' provenance; any figure there left stale is
    listed after the table. Without results_dir the rows go to a fresh `fresh_results_dir()`,
    tracked files untouched, and are printed beside the project's committed ones
    (`compare_rows`); the figures go beside the rows unless figures_dir names a folder.
    Returns {"seconds", "statuses", "table", "figures", "results_dir"}."""
    t0 = time.time()
    resolve(model)  # before the slow task build; the error says how to get the model
    reference = reference_for(model)
    if not results_dir:
        results_dir = fresh_results_dir()
        figures_dir = figures_dir or str(Path(results_dir) / "figures")
        log(
            f"demo: rows and figures go to {results_dir}/ (the committed {reference} is the "
            "reference they are compared with)"
        )
    figures_dir = figures_for(results_dir, figures_dir)  # tracked figures/: only when named
    data_dir = data_dir or config_for(model).data_dir  # "" = the project's data/
    if not data_dir or Path(data_dir).resolve() == path_or(None, "data").resolve():
        ensure_data(data_dir or None, None, log)  # the learnable family's data is committed
    cfg = from_env(
        config_for(
            model,
            results_dir=results_dir,
            figures_dir=figures_dir,
            data_dir=data_dir,
            artifacts_dir=artifacts_dir,
        )
    )
    statuses = run(cfg, log)
    table, figs = show(cfg.results_dir, cfg.figures_dir, check_figures=False)
    runs = training_runs(cfg, statuses)
    from jacrl import report  # pandas and matplotlib: only for the figures

    if runs:
        figs = [
            *figs,
            report.write_training_figure(
                runs, cfg.figures_dir, title=f"training curves, rung {cfg.rungs[-1]} ({model})"
            ),
        ]
    note = report.figures_note(cfg.figures_dir or None)  # once every figure is redrawn
    log(table + (f"\n\n{note}" if note else ""))
    for p in figs:
        log(f"wrote {p}")
    mine = Path(cfg.results_dir) / ROWS_FILE
    if reference.is_file() and mine.resolve() != reference.resolve() and mine.is_file():
        log("\n" + compare_rows(read_rows(reference), read_rows(mine)))
    secs = round(time.time() - t0, 1)
    log(f"demo: {secs:.0f} s")
    return {
        "seconds": secs,
        "statuses": statuses,
        "table": table,
        "figures": figs,
        "results_dir": cfg.results_dir,
    }
