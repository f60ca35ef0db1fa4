"""GRPO, jacrl's own (the loop `grpo_loop`, the rollouts `grpo_rollouts`, the update
`grpo_loss`), with the sandboxed reward.

The system prompt is set on every record and rollouts render prompts the way evaluation does
(`jacrl.prompts.prompt_ids`); a rollout ends at the chat end token, which the update scores; the
adapter is never fused. The rollout temperature is calibrated on the starting policy unless set
(`calibrate_temperature`: at T = 1 a peaky SFT policy's rollouts are garbage); advantages are
centred by default, not divided by a σ that turns noise into full updates
(`grpo_rollouts.group_advantages`); every rollout is kept in rollouts.jsonl. With
`dynamic_sampling` a step draws max_draws batches of prompts in one batched generation and trains
on groups whose rewards differ (DAPO; `grpo_rollouts.fill_batch`), the groups passed over marked
`discarded` in rollouts.jsonl. When beta > 0 the KL reference is the starting policy as a frozen
view over the policy's own arrays (`reference.frozen_view`: no second copy of the weights). The
completion budget equals the eval budget (`jacrl.config.MAX_TOKENS`). With `parent` (sft -> grpo)
training continues the parent's adapter, so every artifact is "base + one adapter" and the
reference model is base + parent adapter. A run stopped part way goes on from its last report
when built again (`jacrl.train.checkpoint`). `report_to` (W&B, SwanLab) sends what metrics.jsonl
gets to a run (`jacrl.train.tracking`; it changes no key). The run's signal (`signal`: how many
groups' rewards differed, so that the update had a gradient) and the adapter's movement
(`adapter_delta`) are in its manifest.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from jacrl import jsonl
from jacrl.config import GRPOConfig
from jacrl.models.registry import load
from jacrl.prompts import SYSTEM_PROMPT, prompt_ids
from jacrl.ruler.reward import reward_isolation
from jacrl.tasks.record import prompt_answer
from jacrl.train import checkpoint, grpo_loop
from jacrl.train.artifacts import (
    Artifact,
    artifact_key,
    build_artifact,
    hash_json,
    key_parts,
    resolve_base,
)
from jacrl.train.grpo_loss import shares_prompt
from jacrl.train.mlx_compat import (
    lora_model,
    seed_all,
    trainable,
    warn_slow_blas,
)
from jacrl.train.reference import frozen_view
from jacrl.train.tracking import Tracking, metrics_log, tracking


def grpo(
    model,
    train_tasks: Sequence[dict],
    valid_tasks: Sequence[dict] | None = None,
    cfg: GRPOConfig | None = None,
    out_root: str | os.PathLike | None = None,
    *,
    parent: Artifact | None = None,
    condition: str = "grpo",
    log: Callable[[str], None] = print,
    report_to: str | None = None,
    project: str | None = None,
) -> Artifact:
    """GRPO with the sandboxed reward. With `parent`, continues the parent's adapter
    (its LoRA shape wins over cfg.lora_*) and the KL reference is base + parent adapter.
    out_root None: the project's artifacts/. report_to / project: experiment tracking of the
    build (`jacrl.train.tracking`; no key changes)."""
    cfg = cfg if cfg is not None else GRPOConfig()
    isolation = reward_isolation()  # refuses here, before any work, without a sandbox
    base = resolve_base(model, parent)
    records = [{**prompt_answer(t), "system": SYSTEM_PROMPT} for t in train_tasks]
    val = [{**prompt_answer(t), "system": SYSTEM_PROMPT} for t in valid_tasks or []]
    data = {"train": hash_json(records), "valid": hash_json(val) if val else None}
    parts = key_parts(condition, "grpo", base, data, cfg, parent)
    track = tracking(report_to, project, condition, parts, cfg)

    def build(tmp: Path) -> dict:
        jsonl.write(tmp / "data" / "train.jsonl", records)
        if val:
            jsonl.write(tmp / "data" / "valid.jsonl", val)
        resume = checkpoint.resume_dir(tmp)
        summary = train_grpo(
            base, records, val, cfg, tmp, parent, track=track, resume=(resume, artifact_key(parts))
        )
        shutil.rmtree(resume, ignore_errors=True)  # the run is whole: nothing to resume
        log(
            f"grpo ({cfg.reward_formula}): reward {summary['first_reward_mean']} -> "
            f"{summary['last_reward_mean']}, "
            f"kl {summary['last_kl']}, truncated {summary['truncated_mean']}"
        )
        return {
            "stage": "grpo",
            "isolation": isolation,
            "data": data,
            "hyperparameters": dataclasses.asdict(cfg),
            "parent_path": str(parent.path) if parent else None,
            "summary": summary,
        }

    return build_artifact(condition, parts, base, out_root, build, log)


def calibrate_temperature(
    policy, tok, records: list[dict], cfg: GRPOConfig, log: Callable[[str], None] = print
) -> tuple[float, list[dict]]:
    """The rollout temperature for this starting policy: the highest of cfg.temperature_grid at
    which group_size rollouts per prompt (the first 8 prompts, GRPO's own top-p/top-k) keep at
    least cfg.calibration_floor of the greedy policy's mean reward on the same prompts; the lowest
    when none does. A policy that gets nothing greedily gets the highest (nothing to lose).
    Returns (temperature, one row per temperature tried)."""
    from jacrl.generate import Request, decode
    from jacrl.ruler.reward import score_completions

    prompts, answers = [r["prompt"] for r in records[:8]], [r["answer"] for r in records[:8]]

    def mean_rewards(temps: list[float]) -> list[float]:
        """The mean reward at each temperature (0: greedy, one per prompt), decoded together."""
        reqs = [
            Request(
                p,
                cfg.group_size if t else 1,
                t,
                cfg.max_completion_length,
                cfg.top_p if t else 0.0,
                cfg.top_k if t else 0,
            )
            for t in temps
            for p in prompts
        ]
        out = decode(policy, tok, reqs, seed=cfg.seed)
        means = []
        for k in range(len(temps)):
            rows = out[k * len(prompts) : (k + 1) * len(prompts)]
            texts = [s.text for row in rows for s in row]
            refs = [a for a, row in zip(answers, rows, strict=True) for _ in row]
            scored = score_completions(texts, refs, formula=cfg.reward_formula)
            means.append(sum(s.score for s in scored) / len(scored))
        return means

    grid = sorted(cfg.temperature_grid, reverse=True)
    greedy, hottest = mean_rewards([0.0, grid[0]])  # the greedy and the first try in one batch
    rows = [{"temperature": 0.0, "reward_mean": round(greedy, 4)}]
    for temp in grid:
        got = hottest if temp == grid[0] else mean_rewards([temp])[0]
        rows.append({"temperature": temp, "reward_mean": round(got, 4)})
        if got >= cfg.calibration_floor * greedy:
            log(
                f"grpo: rollout temperature {temp} (reward {got:.3f} >= "
                f"{cfg.calibration_floor} x greedy {greedy:.3f})"
            )
            return temp, rows
    log(
        f"grpo: no temperature keeps {cfg.calibration_floor} x greedy {greedy:.3f}: "
        f"the lowest, {grid[-1]}"
    )
    return grid[-1], rows


def _reference(policy, base: Path, adapter_in: Path | None, how: str):
    """The frozen KL reference (the starting policy): "shared" a view over the policy's arrays,
    "copy" a second load of the weights."""
    if how == "shared":
        return frozen_view(policy)
    if how != "copy":
        raise ValueError(f"reference must be 'shared' or 'copy', not {how!r}")
    ref, _ = load(base, adapter_path=str(adapter_in) if adapter_in else None, fresh=True)
    return ref.freeze()


def _mean(key: str, rows: list[dict]) -> float | None:
    """Mean of rows' `key` (None values skipped), rounded to 4 places; None when there is none."""
    vals = [r[key] for r in rows if r.get(key) is not None]
    return round(sum(vals) / len(vals), 4) if vals else None


def train_grpo(
    base: Path,
    records: list[dict],
    val: list[dict],
    cfg: GRPOConfig,
    out_dir: Path,
    parent: Artifact | None = None,
    reference: str = "shared",
    track: Tracking | None = None,
    resume: tuple[Path, str] | None = None,
) -> dict:
    """GRPO of `base` (+ the parent's adapter, trained further) on {prompt, answer, system}
    records; writes adapters + adapter_config.json + metrics.jsonl + rollouts.jsonl into out_dir
    (and, with `track`, the same records to its runs); returns a summary for the manifest. With
    beta > 0 the KL reference is the starting policy: `reference` "shared" (a view over the
    policy's own arrays) or "copy" (a second load of the weights; bench/grpo_step.py).
    resume: (checkpoint dir, artifact key): checkpoints saved there after each report, and the
    run goes on from the last one found for the key."""
    import mlx.optimizers as optim  # heavy: loaded only when training

    warn_slow_blas()
    seed_all(cfg.seed)
    adapter_in = parent.adapter_path if parent else None
    policy, tok, acfg = lora_model(base, cfg, out_dir, adapter_in)
    ref = _reference(policy, base, adapter_in, reference) if cfg.beta > 0 else None
    prompts = _prompt_ids(records, tok, cfg)
    batch = max(1, min(cfg.batch_size, len(records)))
    # dynamic sampling decodes max_draws batches of prompts together
    draws = cfg.max_draws if cfg.dynamic_sampling else 1
    rollout = cfg.rollout_batch or batch * cfg.group_size * draws
    ck = checkpoint.latest(*resume) if resume else None
    calibration = None
    if cfg.temperature <= 0:
        if ck is not None:
            temp, calibration = ck.state["temperature"], ck.state["calibration"]
        else:
            temp, calibration = calibrate_temperature(policy, tok, records, cfg)
        seed_all(cfg.seed)  # training starts from the same random state either way
        cfg = dataclasses.replace(cfg, temperature=temp)
    start = _lora_weights(policy)
    t0 = time.time()
    optimizer = optim.Adam(learning_rate=cfg.learning_rate)
    logs = [out_dir / "metrics.jsonl", out_dir / "rollouts.jsonl"]
    if ck is not None:
        checkpoint.restore(ck, policy, optimizer, out_dir, logs)

    def save(step: int) -> None:
        checkpoint.save(
            resume[0], resume[1], step, policy, optimizer, logs,
            temperature=cfg.temperature, calibration=calibration,
        )  # fmt: skip

    with metrics_log(logs[0], "grpo", track) as metrics:
        if ck is not None:
            checkpoint.reload(metrics, logs[0])
        grpo_loop.run(
            policy, ref, tok, records, val, prompts, cfg, batch, optimizer, metrics, out_dir,
            start=ck.step if ck else 0, on_report=save if resume else None,
        )  # fmt: skip
    grpo_loop.save_adapter(policy, out_dir / "adapters.safetensors")
    return _summary(
        cfg,
        _lora_delta(start, policy),
        metrics,
        time.time() - t0,
        acfg,
        parent,
        ref,
        reference,
        batch,
        rollout,
        policy,
        [len(p) for p in prompts],
        calibration,
        ck.step if ck else None,
    )


def _summary(
    cfg,
    delta,
    metrics,
    wall,
    acfg,
    parent,
    ref,
    reference,
    batch,
    rollout,
    policy,
    prompt_tokens,
    calibration,
    resumed_from,
) -> dict:
    """The manifest's summary of a GRPO run: its settings as resolved and its metrics' means."""
    tr, steps = metrics.train, metrics.steps
    return {
        "adapter": acfg,
        "adapter_inherited_from": parent.key if parent else None,
        "reward_formula": cfg.reward_formula,
        "batch_size": batch,
        "rollout_batch": rollout,
        "trainable_params": trainable(policy),
        "max_prompt_tokens": max(prompt_tokens),
        "reference_model": "base + parent adapter"
        if (ref is not None and parent)
        else ("base" if ref is not None else "none (beta = 0)"),
        "reference_weights": reference if ref is not None else None,
        "update_loss": "shared prompt" if shares_prompt(policy) else "one sequence per rollout",
        "first_reward_mean": tr[0]["reward_mean"] if tr else None,
        "last_reward_mean": tr[-1]["reward_mean"] if tr else None,
        "reward_mean": _mean("reward_mean", tr),
        "reward_std": _mean("reward_std", tr),
        "group_reward_std": _mean("group_reward_std", tr),
        "last_kl": tr[-1]["kl"] if tr else None,
        "truncated_mean": _mean("truncated", tr),
        "resumed_from_step": resumed_from,  # train_s is then this process's part only
        "train_s": round(wall, 2),
        "s_per_iter": round(wall / max(1, cfg.iters), 3),
        "temperature": cfg.temperature,
        "temperature_calibration": calibration,
        "advantage": cfg.advantage,
        "min_group_span": cfg.min_group_span,
        "groups_skipped_mean": _mean("groups_skipped", steps),
        "dynamic_sampling": cfg.dynamic_sampling,
        "draws_mean": _mean("draws", steps),
        "rollouts_discarded": sum(s.get("rollouts_discarded", 0) for s in steps),
        **signal(steps),
        "adapter_delta": delta,
        "exact_share_first": _share(steps[:1]),
        "exact_share_last": _share(steps[-1:]),
        "seconds": {k: _mean(k, steps) for k in ("generation_s", "reward_s", "update_s")},
    }


def _prompt_ids(records: list[dict], tok, cfg: GRPOConfig) -> list[list[int]]:
    """Each record's chat prompt as token ids, the way rollouts and evaluation render it; one
    longer than max_seq_length is an error naming it."""
    ids = [prompt_ids(tok, r["prompt"], r.get("system", SYSTEM_PROMPT)) for r in records]
    longest = max(range(len(ids)), key=lambda i: len(ids[i]))
    if len(ids[longest]) > cfg.max_seq_length:
        raise ValueError(
            f"GRPO prompt {longest} has {len(ids[longest])} tokens > max_seq_length="
            f"{cfg.max_seq_length}; raise max_seq_length"
        )
    return ids


def _share(steps: list[dict]) -> float | None:
    """Share of exact rollouts over the steps."""
    n = sum(s["rollouts"] for s in steps)
    return round(sum(s["exact"] for s in steps) / n, 4) if n else None


def signal(steps: list[dict]) -> dict:
    """Whether the run could learn: `signal_rate`, the share of its groups (over every step)
    whose rewards spanned min_group_span — only those get a non-zero advantage; `signal_steps`,
    the steps with at least one; `tier_mix`, its rollouts per reward tier. A run with no
    signal step took only zero gradients (Adam leaves LoRA weights as they were)."""
    groups = sum(s.get("groups_trained", 0) for s in steps)
    kept = sum(s.get("groups_kept", 0) for s in steps)
    tiers: dict[str, int] = {}
    for s in steps:
        for tier, n in (s.get("tiers") or {}).items():
            tiers[tier] = tiers.get(tier, 0) + n
    return {
        "signal_rate": round(kept / groups, 4) if groups else None,
        "signal_steps": sum(s.get("groups_kept", 0) > 0 for s in steps),
        "steps": len(steps),
        "tier_mix": dict(sorted(tiers.items())),
    }


def _lora_weights(policy) -> dict:
    """A copy of the policy's trainable (LoRA) weights."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    return {k: mx.array(v) for k, v in tree_flatten(policy.trainable_parameters())}


def _lora_delta(start: dict, policy) -> float:
    """The L2 norm of the trainable weights' change since `start`: 0.0 exactly when GRPO never
    moved the adapter (every advantage 0, or learning rate 0)."""
    import mlx.core as mx
    from mlx.utils import tree_flatten

    now = dict(tree_flatten(policy.trainable_parameters()))
    sq = sum(float(mx.sum((now[k] - v) ** 2)) for k, v in start.items())
    return round(sq**0.5, 8)
