"""Rejection-sampling fine-tuning (RFT) and STaR, its iterated form.

* `rft`: sample `samples` completions per task from the model (+ an optional parent adapter),
  grade them with `jacrl.ruler.reward`, keep those scoring >= threshold (1.0 = exact output),
  storing the body the grader extracted with the task's template (`Scored.body`), not the raw
  completion; then SFT a fresh adapter from the base model on them.
* `star` (expert iteration): round 0 = gold SFT; each later round is an RFT round that samples
  from the previous round's model, adds the verified bodies to everything kept before (exact
  duplicates dropped) and trains again from the ORIGINAL base (no compounding drift).

Grading uses `cfg.reward_formula`, a hyperparameter (so part of the key) passed explicitly: the
environment cannot change what a cached artifact was trained on. The per-task run timeout is in
the task's answer record (hashed with the training data). `report_to` (W&B, SwanLab) tracks each
build's SFT half, one run per artifact (`jacrl.train.tracking`; it changes no key).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

from jacrl import jsonl
from jacrl.config import RFTConfig, STaRConfig
from jacrl.generate import sample_tasks
from jacrl.prompts import SYSTEM_PROMPT
from jacrl.provenance import data_hash
from jacrl.ruler.reward import check_formula, reward_isolation, score_completions
from jacrl.tasks.record import gold_records, sft_record, task_id
from jacrl.train.artifacts import (
    Artifact,
    build_artifact,
    hash_json,
    key_parts,
    resolve_base,
)
from jacrl.train.sft import sft, train_sft, valid_records
from jacrl.train.tracking import Tracking, report_services, tracking


def sample_verified(model, adapter, tasks: Sequence[dict], cfg: RFTConfig, seed: int) -> dict:
    """Sample `cfg.samples` completions per task, grade them with `cfg.reward_formula`, keep those
    scoring >= cfg.threshold (their template-aware extracted body, `Scored.body`), at most
    `cfg.per_task` distinct bodies per task (0 = all distinct). Returns {"records", "kept",
    "passing", "total", "per_task": {id: kept}, "tasks_with_kept", "reward_formula", "sample_s"}."""
    check_formula(cfg.reward_formula)
    t0 = time.time()
    outs = sample_tasks(model, adapter, tasks, cfg, seed)
    flat = [(i, s.text) for i, ss in enumerate(outs) for s in ss]
    scored = score_completions(
        [c for _, c in flat], [tasks[i]["answer"] for i, _ in flat], formula=cfg.reward_formula
    )
    records, counts, passing = [], {task_id(t): 0 for t in tasks}, 0
    seen: dict[int, set] = {}
    for (i, _), s in zip(flat, scored, strict=True):
        if s.score < cfg.threshold or not s.body.strip():
            continue
        passing += 1
        bodies = seen.setdefault(i, set())
        if s.body in bodies or (cfg.per_task and len(bodies) >= cfg.per_task):
            continue
        bodies.add(s.body)
        records.append(sft_record(tasks[i]["prompt"], s.body))
        counts[task_id(tasks[i])] += 1
    return {
        "records": records,
        "kept": len(records),
        "passing": passing,
        "total": len(flat),
        "per_task": counts,
        "tasks_with_kept": sum(1 for v in counts.values() if v),
        "reward_formula": cfg.reward_formula,
        "sample_s": round(time.time() - t0, 2),
    }


class Round(NamedTuple):
    """What one RFT round did (see `_rft_round`)."""

    sampling: dict  # sample_verified's result without the records
    train: list[dict]  # what the adapter was trained on
    new: int  # records not already in the round's prior
    valid_source: str
    summary: dict  # train_sft's


def _sampling_data(
    train_tasks: Sequence[dict], valid_tasks: Sequence[dict] | None, **extra
) -> dict:
    """The key's data part for a stage that samples: the tasks themselves, not the records."""
    return {
        "train_tasks": data_hash(train_tasks),
        "valid_tasks": data_hash(valid_tasks) if valid_tasks else None,
        **extra,
    }


def _rft_round(
    tmp: Path,
    base: Path,
    adapter: Path | None,
    train_tasks: Sequence[dict],
    valid_tasks: Sequence[dict] | None,
    cfg: RFTConfig,
    *,
    seed: int,
    label: str,
    log: Callable[[str], None],
    prior: Sequence[dict] = (),
    valid: tuple[list[dict], str] | None = None,
    track: Tracking | None = None,
) -> Round:
    """Sample from base + adapter, keep the verified bodies not already in `prior`, and SFT a
    fresh adapter from `base` on prior + those into tmp (data/ and the adapter). `valid`:
    (records, source) to validate on; None = valid_tasks' gold, else the training records.
    `track`: the SFT's experiment tracking."""
    got = sample_verified(base, adapter, train_tasks, cfg, seed)
    seen = {json.dumps(x, sort_keys=True) for x in prior}
    fresh = [x for x in got.pop("records") if json.dumps(x, sort_keys=True) not in seen]
    records = list(prior) + fresh
    log(
        f"{label}: kept {got['kept']} of {got['total']} samples "
        f"({got['tasks_with_kept']}/{len(train_tasks)} tasks), {len(fresh)} new; "
        f"training on {len(records)}"
    )
    if not records:
        raise RuntimeError(
            f"RFT: none of {got['total']} samples scored >= {cfg.threshold}; "
            "nothing to train on (more samples, a warmer model, or a lower "
            "threshold)"
        )
    val, valid_source = valid if valid is not None else valid_records(valid_tasks, records)
    jsonl.write(tmp / "data" / "train.jsonl", records)
    jsonl.write(tmp / "data" / "valid.jsonl", val)
    summary = train_sft(base, records, val, cfg.sft, tmp, track)
    return Round(got, records, len(fresh), valid_source, summary)


def rft(
    model,
    train_tasks: Sequence[dict],
    valid_tasks: Sequence[dict] | None = None,
    cfg: RFTConfig | None = None,
    out_root: str | os.PathLike | None = None,
    *,
    parent: Artifact | None = None,
    condition: str = "rft",
    log: Callable[[str], None] = print,
    report_to: str | None = None,
    project: str | None = None,
) -> Artifact:
    """Rejection-sampling fine-tuning: sample from model (+ parent's adapter), keep verified
    bodies, SFT a fresh adapter on the base model. The key covers the sampling inputs (model,
    parent, tasks, config, seed), so a rerun skips sampling too. Raises when nothing passes.
    report_to / project: experiment tracking of the build's SFT (no key changes)."""
    cfg = cfg if cfg is not None else RFTConfig()
    isolation = reward_isolation()  # refuses here, before any work, without a sandbox
    base = resolve_base(model, parent)
    data = _sampling_data(train_tasks, valid_tasks)
    parts = key_parts(condition, "rft", base, data, cfg, parent, {"system_prompt": SYSTEM_PROMPT})
    track = tracking(report_to, project, condition, parts, cfg)

    def build(tmp: Path) -> dict:
        got = _rft_round(
            tmp,
            base,
            parent.adapter_path if parent else None,
            train_tasks,
            valid_tasks,
            cfg,
            seed=cfg.seed,
            label="rft",
            log=log,
            track=track,
        )
        return {
            "stage": "rft",
            "isolation": isolation,
            "data": {**data, "kept_hash": hash_json(got.train), "valid_source": got.valid_source},
            "rft": got.sampling,
            "sampled_from": str(parent.path) if parent else "base",
            "hyperparameters": dataclasses.asdict(cfg),
            "summary": got.summary,
        }

    return build_artifact(condition, parts, base, out_root, build, log)


def star(
    model,
    train_tasks: Sequence[dict],
    valid_tasks: Sequence[dict] | None = None,
    cfg: STaRConfig | None = None,
    out_root: str | os.PathLike | None = None,
    *,
    condition: str = "star",
    log: Callable[[str], None] = print,
    report_to: str | None = None,
    project: str | None = None,
) -> list[Artifact]:
    """STaR: round 0 = gold SFT (`<condition>0`); round r = an RFT round sampling from round
    r-1's model (seed cfg.seed + r) that trains from the original base on everything kept so far
    plus the new verified bodies. Validation: valid_tasks' gold, else the train tasks' gold.
    Returns one artifact per round; each round's key chains the previous round's key.
    report_to / project: experiment tracking, one run per round built (no key changes)."""
    cfg = cfg if cfg is not None else STaRConfig()
    isolation = reward_isolation()  # refuses here, before any work, without a sandbox
    base = resolve_base(model, None)
    report_to = ",".join(report_services(report_to))  # checked (and the env read) once, up front
    valid = valid_records(valid_tasks, gold_records(train_tasks))
    arts = [
        sft(
            base,
            train_tasks,
            valid_tasks,
            cfg.sft,
            out_root,
            condition=f"{condition}0",
            log=log,
            report_to=report_to,
            project=project,
        )
    ]
    for r in range(1, cfg.rounds + 1):
        prev = arts[-1]
        data = _sampling_data(train_tasks, valid_tasks, round=r)
        parts = key_parts(
            f"{condition}{r}", "star", base, data, cfg, prev, {"system_prompt": SYSTEM_PROMPT}
        )
        track = tracking(report_to, project, f"{condition}{r}", parts, cfg)

        def build(tmp: Path, prev=prev, r=r, data=data, track=track) -> dict:
            got = _rft_round(
                tmp,
                base,
                prev.adapter_path,
                train_tasks,
                valid_tasks,
                cfg,
                seed=cfg.seed + r,
                label=f"star round {r}",
                log=log,
                prior=jsonl.read(prev.path / "data" / "train.jsonl"),
                valid=valid,
                track=track,
            )
            return {
                "stage": "star",
                "isolation": isolation,
                "round": r,
                "data": {
                    **data,
                    "train_hash": hash_json(got.train),
                    "valid_source": got.valid_source,
                    "new_examples": got.new,
                },
                "rft": got.sampling,
                "sampled_from": str(prev.path),
                "hyperparameters": dataclasses.asdict(cfg),
                "summary": got.summary,
            }

        arts.append(build_artifact(f"{condition}{r}", parts, base, out_root, build, log))
    return arts
