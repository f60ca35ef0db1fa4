"""Training stages, each producing a content-addressed LoRA artifact.

* `sft`  — gold SFT: LoRA on (system, user = task prompt, assistant = ```jac fenced gold body),
  prompt masked, with mlx-lm's trainer. Trains on every task given (no carving, scar P26); batch
  clamped to the data (P14); validation on the given valid tasks, else on the train set (said so in
  the manifest).
* `rft`  — rejection-sampling fine-tuning: sample k completions per task (model + optional parent
  adapter), grade with `jacrl.reward`, keep those scoring >= threshold (1.0 = exact), store the body
  the grader extracted with the task's template (`Scored.body`, scar P23), then SFT on them from the
  base model.
* `grpo` — mlx-lm-lora GRPO driven from Python with the `jac_behavioral` reward; system prompt set,
  `end_answer_token=""`, never fused; a frozen reference model loaded separately when beta > 0 (so
  KL is real, scar P21); completion budget = the eval budget (scar P20) and the truncated share of
  rollouts logged. With `parent` (sft -> grpo) it continues training the parent's adapter, so every
  artifact is "base + one adapter" and the reference model is base + parent adapter.
* `star` — STaR / expert iteration: round 0 = gold SFT; each later round samples from the previous
  round's model, keeps verified bodies, accumulates them with everything kept before, and trains
  again from the ORIGINAL base (no compounding drift).

Artifacts. key = sha256 over {condition, stage, base model file hashes, training data hash,
hyperparameters, code version (hash of jacrl/*.py), parent artifact key}; stored in
`<out_root>/<condition>-<key[:16]>/` with `manifest.json` (the key's parts and results),
`adapter_config.json` + `adapters.safetensors` (load with `jacrl.models.load(base, adapter_path=dir)`),
`data/` (the exact training records) and `metrics.jsonl`. A build runs in a temp dir under a lock
and writes `COMPLETE` last before moving into place; an artifact is reused only when its directory
has COMPLETE and its manifest's key equals the computed key — never because a name exists (P19).
Adapters are never fused or quantized. SFT uses mlx-lm's trainer with `sft_loss` (its default loss
minus an off-by-one that also scored one padding token per sequence, and without computing the
masked prompt's logits) and a batch iterator that trains every example every epoch (mlx-lm's
drops the len % batch_size remainder).

The reward. rft, grpo and star grade with `cfg.reward_formula` (tiered | additive), a
hyperparameter and so part of the key; its default is JACRL_REWARD_FORMULA (else tiered), read
once when the config is created. Training passes it explicitly (GRPO: a
`jacrl.reward.reward_function` bound to it), so the environment cannot change what a cached
artifact was trained on. The per-task run timeout is in the task's answer record (hashed with the
training data); the executor's limits are code (in the code version).

metrics.jsonl: one JSON object per report, `{"event": "train"|"val", "stage", "iteration", ...}`.
SFT train events: `train_loss`, `learning_rate`, `iterations_per_second`, `tokens_per_second`,
`trained_tokens`, `peak_memory` (GB); val events: `val_loss`, `val_time`. GRPO train events add
`reward_mean` / `reward_std` (total reward over all rollouts of the reported steps),
`group_reward_std` (mean within-group σ: 0 means no learning signal, scar P2), `kl` (policy vs
frozen reference, per token), `truncated` (share of rollouts that hit `max_completion_length`),
`loss`, `avg_tokens`, plus every raw `train_*` metric mlx-lm-lora reports.

CPU: the mlx-cpu wheel's reference BLAS is ~10x slower than OpenBLAS, and LD_PRELOAD only works at
process start. The `jacrl` CLI re-execs itself with `jacrl.models.fast_blas_env()`; a notebook or
test process should be started with that environment (a warning says so otherwise).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import json
import os
import shutil
import sys
import time
import typing
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from jacrl.evaluate import (
    SYSTEM_PROMPT,
    chat_messages,
    code_version,
    data_hash,
    dir_hashes,
    generate,
    sha256_bytes,
    versions,
)
from jacrl.reward import (
    FORMULAS,
    check_formula,
    default_formula,
    reward_function,
    reward_isolation,
    score_completions,
)

COMPLETE = "COMPLETE"
DEFAULT_OUT = None  # the project's artifacts/


def _f(default, help: str):
    """A knob: its default and its help text in one place (mlx-lm's style)."""
    return field(default=default, metadata={"help": help})


def _formula(what: str):
    """The reward formula knob, resolved when the config is created (so the key holds it)."""
    return field(default_factory=default_formula, metadata={
        "help": f"reward formula grading {what} ({' | '.join(FORMULAS)}); default: "
                "JACRL_REWARD_FORMULA when the config is created, else tiered"})


# -------------------------------------------------------------------------------------------
# hyperparameters (defaults = the reference harness, SPEC §6.4 / §8)
# -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SFTConfig:
    """Gold / RFT / STaR supervised fine-tuning (mlx-lm LoRA trainer)."""

    iters: int = _f(200, "training iterations (the ladder's RFT_ITERS)")
    learning_rate: float = _f(2e-5, "peak learning rate")
    warmup: int = _f(60, "linear warm-up steps from 0 to the peak (0 = none)")
    decay_steps: int = _f(600, "cosine decay horizon after warm-up (long: LR ~1.75e-5 at iter 200,"
                               " as in the reference's logs)")
    batch_size: int = _f(2, "batch size; clamped to min(#train, #valid) (scar P14)")
    max_seq_length: int = _f(2048, "longest tokenized example")
    lora_layers: int = _f(16, "transformer blocks (from the top) that get LoRA; -1 = all; "
                              "clamped to the model's depth")
    lora_rank: int = _f(16, "LoRA rank")
    lora_scale: float = _f(20.0, "LoRA scale (mlx-lm's default)")
    lora_dropout: float = _f(0.0, "LoRA dropout")
    lora_keys: str = _f("", "comma-separated module paths inside a block that get LoRA, e.g. "
                            "'self_attn.v_proj,mlp.down_proj'; '' = every linear layer (mlx-lm)")
    grad_checkpoint: bool = _f(True, "gradient checkpointing (memory for compute)")
    mask_prompt: bool = _f(True, "loss on the assistant turn only")
    val_batches: int = _f(-1, "validation batches per eval (-1 = the whole valid set)")
    steps_per_report: int = _f(10, "iterations between train-loss reports")
    steps_per_eval: int = _f(50, "iterations between validation runs")
    seed: int = _f(0, "seed for LoRA init and batch order")


@dataclass(frozen=True)
class GRPOConfig:
    """GRPO with mlx-lm-lora and the jac_behavioral reward."""

    iters: int = _f(200, "training iterations (GRPO_ITERS)")
    learning_rate: float = _f(1e-6, "constant Adam learning rate (GRPO_LR)")
    beta: float = _f(0.04, "KL coefficient; > 0 loads a frozen reference model (GRPO_BETA)")
    group_size: int = _f(4, "rollouts per prompt (GROUP_SIZE)")
    batch_size: int = _f(1, "prompts per step; clamped to the number of tasks")
    max_completion_length: int = _f(512, "rollout token budget; = the eval budget (the reference "
                                         "used 256 and ~70% of rollouts were truncated, P20)")
    max_seq_length: int = _f(1280, "longest prompt in tokens; a longer one is an error (the "
                                   "trainer would cut off its end)")
    temperature: float = _f(1.0, "rollout sampling temperature (GRPO_TEMP)")
    top_p: float = _f(0.95, "rollout top-p (trainer default)")
    top_k: int = _f(20, "rollout top-k (trainer default)")
    min_p: float = _f(0.0, "rollout min-p")
    lora_layers: int = _f(8, "LoRA blocks; -1 = all; inherited from the parent adapter when chained")
    lora_rank: int = _f(8, "LoRA rank (trainer default)")
    lora_scale: float = _f(10.0, "LoRA scale (mlx-lm-lora's default)")
    lora_dropout: float = _f(0.0, "LoRA dropout")
    lora_keys: str = _f("", "module paths that get LoRA (see SFTConfig); '' = every linear layer")
    grad_checkpoint: bool = _f(True, "gradient checkpointing")
    loss_type: str = _f("grpo", "grpo | bnpo | dr_grpo")
    epsilon: float = _f(1e-4, "importance-ratio clip width (ratio is 1: one update per rollout)")
    rollout_batch: int = _f(0, "sequences decoded together in rollouts; 0 = batch x group (the "
                               "trainer alone decodes only batch_size at once)")
    steps_per_report: int = _f(5, "iterations between metric reports (metrics.jsonl)")
    steps_per_eval: int = _f(0, "iterations between validation rollouts; 0 = never (the "
                                "reference's was effectively off)")
    val_batches: int = _f(1, "validation batches when steps_per_eval > 0")
    seed: int = _f(0, "seed for LoRA init, batch order and rollouts")
    reward_formula: str = _formula("the rollouts")

    def __post_init__(self):
        check_formula(self.reward_formula)


@dataclass(frozen=True)
class RFTConfig:
    """Rejection sampling then SFT on the verified samples."""

    samples: int = _f(8, "completions sampled per task (RFT_SAMPLES)")
    temperature: float = _f(1.0, "sampling temperature (RFT_TEMP)")
    threshold: float = _f(1.0, "keep a sample when its reward >= this (1.0 = exact output)")
    per_task: int = _f(1, "most kept examples per task (the reference kept the first passing one);"
                          " 0 = all distinct passing bodies")
    max_tokens: int = _f(512, "sampling token budget")
    seed: int = _f(0, "sampling seed")
    reward_formula: str = _formula("the samples (matters when threshold < 1)")
    sft: SFTConfig = field(default_factory=SFTConfig,
                           metadata={"help": "the SFT run on the kept examples"})

    def __post_init__(self):
        check_formula(self.reward_formula)


@dataclass(frozen=True)
class STaRConfig:
    """Expert iteration: rounds of sample -> keep verified -> SFT from the original base."""

    rounds: int = _f(2, "extra rounds after the gold round 0 (STAR_ROUNDS; 2 = 3 SFTs)")
    samples: int = _f(6, "completions sampled per task each round (STAR_SAMPLES)")
    temperature: float = _f(1.0, "sampling temperature (STAR_TEMP)")
    threshold: float = _f(1.0, "keep when reward >= this (STAR_PASS; 1.0 = exact)")
    per_task: int = _f(1, "most kept examples per task per round; 0 = all distinct")
    max_tokens: int = _f(512, "sampling token budget")
    seed: int = _f(0, "sampling seed")
    reward_formula: str = _formula("the samples (matters when threshold < 1)")
    sft: SFTConfig = field(default_factory=SFTConfig,
                           metadata={"help": "the SFT run of every round"})

    def __post_init__(self):
        check_formula(self.reward_formula)


ENV_PREFIX = {SFTConfig: "JACRL_SFT_", GRPOConfig: "JACRL_GRPO_", RFTConfig: "JACRL_RFT_",
              STaRConfig: "JACRL_STAR_"}
CONFIGS = {"sft": SFTConfig, "grpo": GRPOConfig, "rft": RFTConfig, "star": STaRConfig}


def _coerce(value, typ):
    if not isinstance(value, str) or typ is str:
        return typ(value) if typ in (int, float) and not isinstance(value, bool) else value
    if typ is bool:
        v = value.strip().lower()
        if v in ("1", "true", "yes", "on"):
            return True
        if v in ("0", "false", "no", "off", ""):
            return False
        raise ValueError(f"not a boolean: {value!r}")
    return typ(value)


def configure(cfg, overrides: Mapping[str, object] | None = None, *,
              env: Mapping[str, str] | None = None, prefix: str | None = None):
    """A copy of `cfg` with overrides applied: `{"iters": 50, "sft.learning_rate": 1e-3}` (dotted
    keys reach nested configs; strings are converted to the field's type), then, when `env` is
    given, `JACRL_<STAGE>_<FIELD>` variables (nested: `JACRL_RFT_SFT_ITERS`). Unknown keys raise."""
    hints = typing.get_type_hints(type(cfg))
    names = {f.name for f in dataclasses.fields(cfg)}
    changes: dict[str, object] = {}
    nested: dict[str, dict] = {}
    for key, value in (overrides or {}).items():
        head, _, rest = key.replace("-", "_").partition(".")
        if head not in names:
            raise KeyError(f"{type(cfg).__name__} has no field {head!r} (fields: "
                           f"{', '.join(sorted(names))})")
        if rest:
            nested.setdefault(head, {})[rest] = value
        elif dataclasses.is_dataclass(hints[head]) and isinstance(value, Mapping):
            nested.setdefault(head, {}).update(value)
        else:
            try:
                changes[head] = _coerce(value, hints[head])
            except ValueError as e:  # name the knob: "SFTConfig.iters = 'abc': ..."
                raise ValueError(f"{type(cfg).__name__}.{head} = {value!r}: {e}") from None
    for head, sub in nested.items():
        changes[head] = configure(getattr(cfg, head), sub)
    cfg = dataclasses.replace(cfg, **changes)
    if env is not None:
        prefix = prefix if prefix is not None else ENV_PREFIX.get(type(cfg), "JACRL_")
        env_changes = {}
        for f in dataclasses.fields(cfg):
            typ = hints[f.name]
            name = prefix + f.name.upper()
            if dataclasses.is_dataclass(typ):
                env_changes[f.name] = configure(getattr(cfg, f.name), env=env, prefix=name + "_")
            elif name in env:
                try:
                    env_changes[f.name] = _coerce(env[name], typ)
                except ValueError as e:
                    raise ValueError(f"{name}={env[name]!r}: {e}") from None
        cfg = dataclasses.replace(cfg, **env_changes)
    return cfg


def from_dict(cls, d: Mapping[str, object] | None = None):
    """`cls()` with `d` applied (see `configure`)."""
    return configure(cls(), d)


def config_help(cls) -> str:
    """One line per knob: name, default, help (for --help texts and docs)."""
    out = []
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            out.append(f"{f.name}.*: {f.metadata.get('help', '')} (see {type(default).__name__})")
        else:
            out.append(f"{f.name}={default!r}: {f.metadata.get('help', '')}")
    return "\n".join(out)


# -------------------------------------------------------------------------------------------
# artifacts
# -------------------------------------------------------------------------------------------


@dataclass
class Artifact:
    """A trained adapter on disk: load with `jacrl.models.load(base_model, adapter_path)`."""

    path: Path
    key: str
    adapter_path: Path
    base_model: Path
    manifest: dict
    reused: bool = False

    @classmethod
    def load(cls, path: str | os.PathLike) -> Artifact:
        path = Path(path)
        if not (path / COMPLETE).is_file():
            raise FileNotFoundError(f"{path} is not a complete artifact (no {COMPLETE} marker)")
        m = json.loads((path / "manifest.json").read_text())
        return cls(path, m["key"], path, Path(m["base_model"]["path"]), m, reused=True)


def _hash_json(obj) -> str:
    return sha256_bytes(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode())


def artifact_key(parts: dict) -> str:
    return _hash_json(parts)


def _key_parts(condition: str, stage: str, base: Path, data: dict, cfg, parent: Artifact | None,
               extra: dict | None = None) -> dict:
    return {
        "condition": condition,
        "stage": stage,
        "base_model": dir_hashes(base),
        "data": data,
        "hyperparameters": dataclasses.asdict(cfg),
        "code_version": code_version(),
        "parent": parent.key if parent else None,
        **(extra or {}),
    }


def _warn_slow_blas() -> None:
    from jacrl.models import find_openblas

    if sys.platform.startswith("linux") and not os.environ.get("LD_PRELOAD") and find_openblas():
        warnings.warn("MLX is using the slow reference BLAS in this process (~10x slower "
                      "training). In Jupyter pick the `jacrl` kernel (`make setup` installs it: "
                      "python -m jacrl.kernel); else start Python with "
                      "jacrl.models.fast_blas_env() in the environment, or use the `jacrl` CLI, "
                      "which re-execs with it.", stacklevel=3)


def build_artifact(condition: str, parts: dict, base: Path, out_root: str | os.PathLike | None,
                   build: Callable[[Path], dict], log: Callable[[str], None] = print) -> Artifact:
    """Reuse `<out_root>/<condition>-<key16>` if complete with the same key; else run
    `build(tmp_dir) -> manifest extras` in a temp dir under a lock, write the manifest, then the
    COMPLETE marker, then move it into place."""
    from jacrl.project import path_or

    key = artifact_key(parts)
    root = path_or(out_root, "artifacts")
    root.mkdir(parents=True, exist_ok=True)
    name = f"{condition}-{key[:16]}"
    final = root / name

    def existing() -> Artifact | None:
        if (final / COMPLETE).is_file():
            try:
                m = json.loads((final / "manifest.json").read_text())
            except (OSError, ValueError):
                return None
            if m.get("key") == key:
                return Artifact(final, key, final, base, m, reused=True)
        return None

    if (a := existing()) is not None:
        log(f"reusing {final} (key {key[:16]}, complete)")
        return a
    with open(root / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same key
        if (a := existing()) is not None:
            log(f"reusing {final} (built meanwhile by another process)")
            return a
        for stale in root.glob(f".{name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)  # a killed build: redo it
        tmp = root / f".{name}.tmp-{os.getpid()}"
        tmp.mkdir()
        t0 = time.time()
        try:
            extras = build(tmp)
            manifest = {
                "key": key, "condition": condition, "name": name,
                "base_model": {"path": str(base), "files": parts["base_model"]},
                "key_parts": parts,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "wall_s": round(time.time() - t0, 2),
                "versions": versions(),
                "blas": os.environ.get("LD_PRELOAD", ""),
                **extras,
            }
            (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
            with open(tmp / COMPLETE, "w") as f:  # written last
                f.write(key + "\n")
                f.flush()
                os.fsync(f.fileno())
            if final.exists():
                shutil.rmtree(final)  # incomplete or another key's leftovers under the same name
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    log(f"built {final} in {manifest['wall_s']:.1f}s")
    return Artifact(final, key, final, base, manifest, reused=False)


# -------------------------------------------------------------------------------------------
# data
# -------------------------------------------------------------------------------------------


def fenced(body: str) -> str:
    return f"```jac\n{body}\n```"


def gold_body(task: dict) -> str:
    from jacrl.extract import dedent

    meta = task.get("meta") or json.loads(task["answer"])
    return dedent(meta["gold"]).strip("\n")


def task_id(task: dict) -> str:
    return (task.get("meta") or json.loads(task["answer"]))["id"]


def sft_record(prompt: str, body: str) -> dict:
    return {"messages": chat_messages(prompt, fenced(body))}


def gold_records(tasks: Sequence[dict]) -> list[dict]:
    """One chat example per task: user = the prompt, assistant = the fenced gold body."""
    return [sft_record(t["prompt"], gold_body(t)) for t in tasks]


def _valid_records(valid_tasks, train_records) -> tuple[list[dict], str]:
    if valid_tasks:
        return gold_records(valid_tasks), "valid tasks (gold)"
    return list(train_records), "train set (no valid tasks given: validation loss is on training data)"


def _write_jsonl(path: Path, records: Sequence[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


# -------------------------------------------------------------------------------------------
# shared training plumbing
# -------------------------------------------------------------------------------------------


class MetricsLog:
    """mlx-lm TrainingCallback that appends one JSON line per report to metrics.jsonl."""

    def __init__(self, path: Path, stage: str, log: Callable[[str], None] | None = None):
        self.path, self.stage, self.log = path, stage, log
        self.train: list[dict] = []
        self.val: list[dict] = []

    def _write(self, event: str, info: dict) -> dict:
        rec = {"event": event, "stage": self.stage, "time": round(time.time(), 3)}
        for k, v in info.items():
            rec[k] = v.item() if hasattr(v, "item") else v
        if self.stage == "grpo" and event == "train":
            rec = {**rec, **_grpo_canonical(rec)}
        with open(self.path, "a") as f:
            f.write(json.dumps(rec) + "\n")
        return rec

    def on_train_loss_report(self, info: dict) -> None:
        self.train.append(self._write("train", info))

    def on_val_loss_report(self, info: dict) -> None:
        self.val.append(self._write("val", info))


def _grpo_canonical(rec: dict) -> dict:
    return {
        "loss": rec.get("train_loss"),
        "reward_mean": rec.get("train_total_rewards_mean"),
        "reward_std": rec.get("train_total_rewards_std"),
        "group_reward_std": rec.get("train_grouped_rewards_std"),
        "kl": rec.get("train_kl"),
        "truncated": rec.get("train_hit_max_tokens_ratio"),
        "avg_tokens": rec.get("train_average_generated_tokens"),
    }


def _seed(seed: int) -> None:
    import mlx.core as mx
    import numpy as np

    mx.random.seed(seed)
    np.random.seed(seed)


def _lora_layers(model, wanted: int) -> int:
    n = len(model.layers)
    return n if wanted < 0 else min(wanted, n)


def _adapter_config(num_layers: int, rank: int, scale: float, dropout: float,
                    keys: str = "") -> dict:
    """mlx-lm's adapter_config.json (what `load(..., adapter_path)` reads)."""
    params = {"rank": rank, "scale": scale, "dropout": dropout}
    if keys.strip():
        params["keys"] = [k.strip() for k in keys.split(",") if k.strip()]
    return {"fine_tune_type": "lora", "num_layers": num_layers, "lora_parameters": params}


def _add_lora(model, cfg: dict) -> None:
    from mlx_lm.tuner.utils import linear_to_lora_layers

    model.freeze()
    linear_to_lora_layers(model, cfg["num_layers"], cfg["lora_parameters"])


def _unfreeze_lora(model) -> None:
    """After `load(base, adapter_path)`: train the adapter's LoRA matrices only."""
    model.freeze()

    def visit(_, m):
        if hasattr(m, "lora_a") and hasattr(m, "lora_b"):
            m.unfreeze(keys=["lora_a", "lora_b"], recurse=False, strict=False)

    model.apply_to_modules(visit)


def _trainable(model) -> int:
    from mlx.utils import tree_flatten

    return sum(v.size for _, v in tree_flatten(model.trainable_parameters()))


def _checkpoint_blocks(model) -> None:
    """Gradient checkpointing on the transformer block class, once per process (mlx-lm's helper
    patches the class's __call__; applying it twice would nest checkpoints)."""
    from mlx_lm.tuner.trainer import grad_checkpoint

    cls = type(model.layers[0])
    if not getattr(cls, "_jacrl_checkpointed", False):
        grad_checkpoint(model.layers[0])
        cls._jacrl_checkpointed = True


def _iterate_all(dataset, batch_size, max_seq_length, loop=False, seed=None, comm_group=None,
                 head_skip: int = 0):
    """mlx-lm's batch iterator, except that every example is seen every epoch (mlx-lm drops the
    remainder of len % batch_size — with 7 tasks and batch 2 one task would never be trained) and
    the order comes from a local seeded generator. Yields (tokens[B, L], [(offset, length)]);
    with head_skip > 0 also a third element for `sft_loss`: an empty-valued array whose length is
    the number of leading positions no row of the batch scores (the shortest prompt, rounded down
    to a multiple of head_skip so that few distinct shapes reach the compiled step)."""
    import mlx.core as mx
    import numpy as np

    n = len(dataset)
    if n < batch_size:
        raise ValueError(f"dataset has {n} examples, fewer than batch_size={batch_size}")
    rng = np.random.default_rng(0 if seed is None else seed)
    while True:
        order = rng.permutation(n) if loop else np.arange(n)
        batches = [list(order[i:i + batch_size]) for i in range(0, n, batch_size)]
        if len(batches[-1]) < batch_size:  # top up the last batch with other examples
            rest = [j for j in order if j not in batches[-1]]
            batches[-1] += rest[:batch_size - len(batches[-1])]
        for b in batches:
            items = [dataset[int(j)] for j in b]
            toks = [it[0] if isinstance(it, tuple) else it for it in items]
            offsets = [it[1] if isinstance(it, tuple) else 0 for it in items]
            lengths = [min(len(t), max_seq_length) for t in toks]
            pad = 32
            width = min(1 + pad * ((max(lengths) + pad - 1) // pad), max_seq_length)
            arr = np.zeros((len(b), width), np.int32)
            for r, (t, ln) in enumerate(zip(toks, lengths)):
                arr[r, :ln] = t[:ln]
            if head_skip > 0:
                skip = min(max(0, min(offsets) - 1) // head_skip * head_skip, width - 2)
                yield (mx.array(arr), mx.array(list(zip(offsets, lengths))),
                       mx.zeros((max(0, skip),), mx.int8))
            else:
                yield mx.array(arr), mx.array(list(zip(offsets, lengths)))
        if not loop:
            return


def sft_loss(model, batch, lengths, skip=None):
    """mlx-lm's default_loss with two changes. (1) The mask's upper bound: mlx-lm uses
    `steps <= length`, which also scores the padding token after each sequence's last token (an
    unlearnable target for jac-tiny, whose pad embedding never trained). (2) With `skip` (see
    `_iterate_all`), the output projection runs only on the positions from len(skip) on: the
    masked prompt's logits are never computed (~13 % of a compiled SFT step on jac-tiny, whose
    prompts are ~3/4 of each example). The loss value is the same either way."""
    import mlx.core as mx
    from mlx import nn

    inputs, targets = batch[:, :-1], batch[:, 1:]
    start = 0 if skip is None else skip.shape[0]
    head = _output_head(model) if start else None
    if head is None:
        start, logits = 0, model(inputs)
    else:
        logits = head(model.model(inputs)[:, start:])
        targets = targets[:, start:]
    steps = mx.arange(start + 1, start + targets.shape[1] + 1)
    mask = mx.logical_and(steps >= lengths[:, 0:1], steps < lengths[:, 1:])
    ce = nn.losses.cross_entropy(logits, targets) * mask
    ntoks = mask.sum()
    return ce.astype(mx.float32).sum() / ntoks, ntoks


def _output_head(model):
    """`h -> logits` for models laid out as mlx-lm's `model.model` (the final norm included) +
    `lm_head` or tied `embed_tokens`; None otherwise. `_sliced_head_ok` checks it on real input."""
    inner = getattr(model, "model", None)
    if inner is None:
        return None
    if getattr(model, "lm_head", None) is not None:
        return model.lm_head
    emb = getattr(inner, "embed_tokens", None)
    return getattr(emb, "as_linear", None)


def _sliced_head_ok(model, tokens: list[int]) -> bool:
    """Whether `_output_head(model)(model.model(x))` equals `model(x)` on `tokens` (a model with
    logit scaling or soft-capping after its head would differ: sft_loss then uses model(x))."""
    import mlx.core as mx

    head = _output_head(model)
    if head is None:
        return False
    try:
        x = mx.array([tokens[:64]])
        return bool(mx.allclose(head(model.model(x)), model(x), atol=1e-4, rtol=1e-4).item())
    except Exception:  # noqa: BLE001 (any other layout: fall back to the full logits)
        return False


def _sft_schedule(cfg: SFTConfig):
    import mlx.optimizers as optim

    decay = optim.cosine_decay(cfg.learning_rate, max(1, cfg.decay_steps))
    if cfg.warmup <= 0:
        return decay
    warm = optim.linear_schedule(0.0, cfg.learning_rate, cfg.warmup)
    return optim.join_schedules([warm, decay], [cfg.warmup])


def train_sft(base: Path, train_records: Sequence[dict], valid_records: Sequence[dict],
              cfg: SFTConfig, out_dir: Path) -> dict:
    """LoRA SFT of `base` on chat records; writes adapters + adapter_config.json + metrics.jsonl
    into out_dir; returns a summary for the manifest."""
    import mlx.optimizers as optim
    from mlx_lm.tuner.datasets import CacheDataset, ChatDataset
    from mlx_lm.tuner.trainer import TrainingArgs, train

    from jacrl.models import load

    _warn_slow_blas()
    if not train_records:
        raise ValueError("SFT needs at least one training example")
    _seed(cfg.seed)
    model, tok = load(base)
    acfg = _adapter_config(_lora_layers(model, cfg.lora_layers), cfg.lora_rank, cfg.lora_scale,
                           cfg.lora_dropout, cfg.lora_keys)
    _add_lora(model, acfg)
    if cfg.grad_checkpoint:
        _checkpoint_blocks(model)
    (out_dir / "adapter_config.json").write_text(json.dumps(acfg, indent=1) + "\n")
    batch = max(1, min(cfg.batch_size, len(train_records), len(valid_records)))
    train_ds = CacheDataset(ChatDataset(list(train_records), tok, mask_prompt=cfg.mask_prompt))
    valid_ds = CacheDataset(ChatDataset(list(valid_records), tok, mask_prompt=cfg.mask_prompt))
    longest = max(len(train_ds[i][0]) for i in range(len(train_ds)))
    metrics = MetricsLog(out_dir / "metrics.jsonl", "sft")
    args = TrainingArgs(batch_size=batch, iters=cfg.iters, val_batches=cfg.val_batches,
                        steps_per_report=cfg.steps_per_report, steps_per_eval=cfg.steps_per_eval,
                        steps_per_save=cfg.iters + 1, max_seq_length=cfg.max_seq_length,
                        adapter_file=str(out_dir / "adapters.safetensors"),
                        grad_checkpoint=False)
    t0 = time.time()

    head_skip = 64 if cfg.mask_prompt and _sliced_head_ok(model, train_ds[0][0]) else 0

    def batches(dataset, batch_size, max_seq_length, loop=False, seed=None, comm_group=None):
        return _iterate_all(dataset, batch_size, max_seq_length, loop=loop,
                            seed=cfg.seed if loop else 0, head_skip=head_skip)

    train(model=model, optimizer=optim.Adam(learning_rate=_sft_schedule(cfg)),
          train_dataset=train_ds, val_dataset=valid_ds, args=args, loss=sft_loss,
          iterate_batches=batches, training_callback=metrics)
    wall = time.time() - t0
    last_train = metrics.train[-1] if metrics.train else {}
    last_val = metrics.val[-1] if metrics.val else {}
    return {
        "adapter": acfg, "batch_size": batch, "trainable_params": _trainable(model),
        "train_examples": len(train_records), "valid_examples": len(valid_records),
        "longest_example_tokens": longest, "logits_prompt_skipped": bool(head_skip),
        "final_train_loss": last_train.get("train_loss"),
        "final_val_loss": last_val.get("val_loss"),
        "train_s": round(wall, 2), "s_per_iter": round(wall / max(1, cfg.iters), 4),
    }


# -------------------------------------------------------------------------------------------
# stages
# -------------------------------------------------------------------------------------------


def _resolve_base(model, parent: Artifact | None) -> Path:
    from jacrl.models import resolve

    base = resolve(model)
    if parent is not None and Path(parent.base_model).resolve() != base:
        raise ValueError(f"parent artifact {parent.path} was trained on {parent.base_model}, "
                         f"not {base}")
    return base


def sft(model, train_tasks: Sequence[dict], valid_tasks: Sequence[dict] | None = None,
        cfg: SFTConfig = SFTConfig(), out_root: str | os.PathLike | None = DEFAULT_OUT, *,
        condition: str = "sft", log: Callable[[str], None] = print) -> Artifact:
    """Gold LoRA SFT on ALL `train_tasks` (scar P26); validation on `valid_tasks`' gold bodies,
    or on the train set when none are given (recorded in the manifest)."""
    base = _resolve_base(model, None)
    train_records = gold_records(train_tasks)
    valid_records, valid_source = _valid_records(valid_tasks, train_records)
    data = {"train": _hash_json(train_records), "valid": _hash_json(valid_records),
            "valid_source": valid_source}
    parts = _key_parts(condition, "sft", base, data, cfg, None)

    def build(tmp: Path) -> dict:
        _write_jsonl(tmp / "data" / "train.jsonl", train_records)
        _write_jsonl(tmp / "data" / "valid.jsonl", valid_records)
        summary = train_sft(base, train_records, valid_records, cfg, tmp)
        return {"stage": "sft", "data": {**data, "train_tasks": [task_id(t) for t in train_tasks],
                                         "valid_tasks": [task_id(t) for t in valid_tasks or []]},
                "hyperparameters": dataclasses.asdict(cfg), "summary": summary}

    return build_artifact(condition, parts, base, out_root, build, log)


def sample_verified(model, adapter, tasks: Sequence[dict], *, samples: int, temperature: float,
                    threshold: float, per_task: int, max_tokens: int, seed: int,
                    formula: str) -> dict:
    """Sample `samples` completions per task, grade them with reward `formula`, keep those scoring
    >= threshold (their template-aware extracted body, `Scored.body`), at most `per_task` distinct
    bodies per task (0 = all distinct). Returns {"records", "kept", "total", "per_task": {id:
    kept}, "reward_formula", "sample_s", ...}."""
    from jacrl.evaluate import load_model

    check_formula(formula)
    t0 = time.time()
    lm, tok = load_model(model, adapter)
    outs = generate(lm, tok, [t["prompt"] for t in tasks], n=samples, temperature=temperature,
                    max_tokens=max_tokens, seed=seed)
    flat = [(i, s.text) for i, ss in enumerate(outs) for s in ss]
    scored = score_completions([c for _, c in flat], [tasks[i]["answer"] for i, _ in flat],
                               formula=formula)
    records, counts, passing = [], {task_id(t): 0 for t in tasks}, 0
    seen: dict[int, set] = {}
    for (i, _), s in zip(flat, scored):
        if s.score < threshold or not s.body.strip():
            continue
        passing += 1
        bodies = seen.setdefault(i, set())
        if s.body in bodies or (per_task and len(bodies) >= per_task):
            continue
        bodies.add(s.body)
        records.append(sft_record(tasks[i]["prompt"], s.body))
        counts[task_id(tasks[i])] += 1
    return {"records": records, "kept": len(records), "passing": passing, "total": len(flat),
            "per_task": counts, "tasks_with_kept": sum(1 for v in counts.values() if v),
            "reward_formula": formula, "sample_s": round(time.time() - t0, 2)}


def rft(model, train_tasks: Sequence[dict], valid_tasks: Sequence[dict] | None = None,
        cfg: RFTConfig | None = None, out_root: str | os.PathLike | None = DEFAULT_OUT, *,
        parent: Artifact | None = None, condition: str = "rft",
        log: Callable[[str], None] = print) -> Artifact:
    """Rejection-sampling fine-tuning: sample from model (+ parent's adapter), keep verified
    bodies, SFT a fresh adapter on the base model. The key covers the sampling inputs (model,
    parent, tasks, config, seed), so a rerun skips sampling too. Raises when nothing passes."""
    cfg = cfg if cfg is not None else RFTConfig()
    isolation = reward_isolation()  # refuses here, before any work, without a sandbox
    base = _resolve_base(model, parent)
    data = {"train_tasks": data_hash(train_tasks),
            "valid_tasks": data_hash(valid_tasks) if valid_tasks else None}
    parts = _key_parts(condition, "rft", base, data, cfg, parent,
                       {"system_prompt": SYSTEM_PROMPT})

    def build(tmp: Path) -> dict:
        got = sample_verified(base, parent.adapter_path if parent else None, train_tasks,
                              samples=cfg.samples, temperature=cfg.temperature,
                              threshold=cfg.threshold, per_task=cfg.per_task,
                              max_tokens=cfg.max_tokens, seed=cfg.seed,
                              formula=cfg.reward_formula)
        log(f"rft: kept {got['kept']} of {got['total']} samples "
            f"({got['tasks_with_kept']}/{len(train_tasks)} tasks)")
        if not got["records"]:
            raise RuntimeError(f"RFT: none of {got['total']} samples scored >= {cfg.threshold}; "
                               "nothing to train on (more samples, a warmer model, or a lower "
                               "threshold)")
        valid_records, valid_source = _valid_records(valid_tasks, got["records"])
        _write_jsonl(tmp / "data" / "train.jsonl", got["records"])
        _write_jsonl(tmp / "data" / "valid.jsonl", valid_records)
        summary = train_sft(base, got["records"], valid_records, cfg.sft, tmp)
        return {"stage": "rft", "isolation": isolation,
                "data": {**data, "kept_hash": _hash_json(got["records"]),
                         "valid_source": valid_source},
                "rft": {k: v for k, v in got.items() if k != "records"},
                "sampled_from": str(parent.path) if parent else "base",
                "hyperparameters": dataclasses.asdict(cfg), "summary": summary}

    return build_artifact(condition, parts, base, out_root, build, log)


@contextlib.contextmanager
def _rollout_concurrency(n: int):
    """mlx-lm-lora decodes only `batch_size` rollouts at once; let it decode n together."""
    from mlx_lm_lora.trainer import grpo_trainer

    orig = grpo_trainer.BatchGenerator

    def wider(model, **kw):
        kw["completion_batch_size"] = max(n, kw.get("completion_batch_size", 1))
        kw["prefill_batch_size"] = max(n, kw.get("prefill_batch_size", 1))
        return orig(model, **kw)

    grpo_trainer.BatchGenerator = wider
    try:
        yield
    finally:
        grpo_trainer.BatchGenerator = orig


def grpo(model, train_tasks: Sequence[dict], valid_tasks: Sequence[dict] | None = None,
         cfg: GRPOConfig | None = None, out_root: str | os.PathLike | None = DEFAULT_OUT, *,
         parent: Artifact | None = None, condition: str = "grpo",
         log: Callable[[str], None] = print) -> Artifact:
    """GRPO with mlx-lm-lora and `jac_behavioral`. With `parent`, continues the parent's adapter
    (its LoRA shape wins over cfg.lora_*) and the KL reference is base + parent adapter."""
    cfg = cfg if cfg is not None else GRPOConfig()
    isolation = reward_isolation()  # refuses here, before any work, without a sandbox
    base = _resolve_base(model, parent)
    records = [{"prompt": t["prompt"], "answer": t["answer"], "system": SYSTEM_PROMPT}
               for t in train_tasks]
    val = [{"prompt": t["prompt"], "answer": t["answer"], "system": SYSTEM_PROMPT}
           for t in valid_tasks or []]
    data = {"train": _hash_json(records), "valid": _hash_json(val) if val else None}
    parts = _key_parts(condition, "grpo", base, data, cfg, parent)

    def build(tmp: Path) -> dict:
        _write_jsonl(tmp / "data" / "train.jsonl", records)
        if val:
            _write_jsonl(tmp / "data" / "valid.jsonl", val)
        summary = train_grpo(base, records, val, cfg, tmp, parent)
        log(f"grpo ({cfg.reward_formula}): reward {summary['first_reward_mean']} -> "
            f"{summary['last_reward_mean']}, "
            f"kl {summary['last_kl']}, truncated {summary['truncated_mean']}")
        return {"stage": "grpo", "isolation": isolation, "data": data,
                "hyperparameters": dataclasses.asdict(cfg),
                "parent_path": str(parent.path) if parent else None, "summary": summary}

    return build_artifact(condition, parts, base, out_root, build, log)


def train_grpo(base: Path, records: list[dict], val: list[dict], cfg: GRPOConfig, out_dir: Path,
               parent: Artifact | None = None) -> dict:
    import mlx.optimizers as optim
    from mlx_lm_lora.trainer.datasets import CacheDataset, GRPODataset
    from mlx_lm_lora.trainer.grpo_trainer import GRPOTrainingArgs
    from mlx_lm_lora.trainer.grpo_trainer import train_grpo as _train_grpo

    from jacrl.models import load

    _warn_slow_blas()
    _seed(cfg.seed)
    adapter_in = str(parent.adapter_path) if parent else None
    policy, tok = load(base, adapter_path=adapter_in)
    if parent:
        acfg = json.loads((parent.adapter_path / "adapter_config.json").read_text())
        _unfreeze_lora(policy)
    else:
        acfg = _adapter_config(_lora_layers(policy, cfg.lora_layers), cfg.lora_rank,
                               cfg.lora_scale, cfg.lora_dropout, cfg.lora_keys)
        _add_lora(policy, acfg)
    (out_dir / "adapter_config.json").write_text(json.dumps(acfg, indent=1) + "\n")
    if cfg.grad_checkpoint:
        _checkpoint_blocks(policy)
    ref = None
    if cfg.beta > 0:  # a separate frozen copy: KL against the starting policy is real (P21)
        ref, _ = load(base, adapter_path=adapter_in)
        ref.freeze()
    train_ds = CacheDataset(GRPODataset(records, tok))
    prompt_tokens = [len(train_ds[i][0]) for i in range(len(train_ds))]
    if max(prompt_tokens) > cfg.max_seq_length:
        # mlx-lm-lora keeps only the first max_seq_length prompt tokens: the end of the prompt
        # (the task's code and the assistant header) would be cut off.
        raise ValueError(f"a GRPO prompt has {max(prompt_tokens)} tokens > max_seq_length="
                         f"{cfg.max_seq_length}; raise max_seq_length")
    val_ds = CacheDataset(GRPODataset(val, tok)) if val and cfg.steps_per_eval > 0 else None
    batch = max(1, min(cfg.batch_size, len(records)))
    metrics = MetricsLog(out_dir / "metrics.jsonl", "grpo")
    args = GRPOTrainingArgs(
        batch_size=batch, iters=cfg.iters, val_batches=cfg.val_batches,
        steps_per_report=cfg.steps_per_report,
        steps_per_eval=cfg.steps_per_eval if cfg.steps_per_eval > 0 else cfg.iters + 1,
        steps_per_save=cfg.iters + 1, max_seq_length=cfg.max_seq_length,
        adapter_file=str(out_dir / "adapters.safetensors"), grad_checkpoint=False,
        group_size=cfg.group_size, beta=cfg.beta, epsilon=cfg.epsilon,
        max_completion_length=cfg.max_completion_length, temperature=cfg.temperature,
        top_p=cfg.top_p, top_k=cfg.top_k, min_p=cfg.min_p, grpo_loss_type=cfg.loss_type)
    rollout = cfg.rollout_batch or batch * cfg.group_size
    reward = reward_function(cfg.reward_formula)  # bound: the env var is not read mid-training
    t0 = time.time()
    with _rollout_concurrency(rollout):
        _train_grpo(model=policy, ref_model=ref, tokenizer=tok,
                    optimizer=optim.Adam(learning_rate=cfg.learning_rate),
                    train_dataset=train_ds, val_dataset=val_ds, reward_funcs=[reward],
                    args=args, training_callback=metrics, end_answer_token="")
    wall = time.time() - t0
    tr = metrics.train

    def stat(key, rows):
        vals = [r[key] for r in rows if r.get(key) is not None]
        return round(sum(vals) / len(vals), 4) if vals else None

    return {
        "adapter": acfg, "adapter_inherited_from": parent.key if parent else None,
        "reward_formula": reward.formula,
        "batch_size": batch, "rollout_batch": rollout, "trainable_params": _trainable(policy),
        "max_prompt_tokens": max(prompt_tokens),
        "reference_model": "base + parent adapter" if (ref is not None and parent) else
                           ("base" if ref is not None else "none (beta = 0)"),
        "first_reward_mean": tr[0]["reward_mean"] if tr else None,
        "last_reward_mean": tr[-1]["reward_mean"] if tr else None,
        "reward_mean": stat("reward_mean", tr), "reward_std": stat("reward_std", tr),
        "group_reward_std": stat("group_reward_std", tr),
        "last_kl": tr[-1]["kl"] if tr else None, "truncated_mean": stat("truncated", tr),
        "train_s": round(wall, 2), "s_per_iter": round(wall / max(1, cfg.iters), 3),
    }


def star(model, train_tasks: Sequence[dict], valid_tasks: Sequence[dict] | None = None,
         cfg: STaRConfig | None = None, out_root: str | os.PathLike | None = DEFAULT_OUT, *,
         condition: str = "star", log: Callable[[str], None] = print) -> list[Artifact]:
    """STaR: round 0 = gold SFT; round r = sample from round r-1's model, keep verified bodies,
    add them to everything kept so far (exact duplicates dropped), SFT from the original base.
    Returns one artifact per round; each round's key chains the previous round's key."""
    cfg = cfg if cfg is not None else STaRConfig()
    isolation = reward_isolation()  # refuses here, before any work, without a sandbox
    base = _resolve_base(model, None)
    gold = gold_records(train_tasks)
    valid_records, valid_source = _valid_records(valid_tasks, gold)
    sft_cfg = cfg.sft
    arts: list[Artifact] = []
    first = sft(base, train_tasks, valid_tasks, sft_cfg, out_root, condition=f"{condition}0",
                log=log)
    arts.append(first)
    accumulated = gold
    for r in range(1, cfg.rounds + 1):
        prev = arts[-1]
        data = {"train_tasks": data_hash(train_tasks),
                "valid_tasks": data_hash(valid_tasks) if valid_tasks else None, "round": r}
        parts = _key_parts(f"{condition}{r}", "star", base, data, cfg, prev,
                           {"system_prompt": SYSTEM_PROMPT})
        prior = list(accumulated)

        def build(tmp: Path, prev=prev, prior=prior, r=r, data=data) -> dict:
            got = sample_verified(base, prev.adapter_path, train_tasks, samples=cfg.samples,
                                  temperature=cfg.temperature, threshold=cfg.threshold,
                                  per_task=cfg.per_task, max_tokens=cfg.max_tokens,
                                  seed=cfg.seed + r, formula=cfg.reward_formula)
            seen = {json.dumps(x, sort_keys=True) for x in prior}
            fresh = [x for x in got["records"] if json.dumps(x, sort_keys=True) not in seen]
            train_records = prior + fresh
            log(f"star round {r}: kept {got['kept']} of {got['total']} samples, {len(fresh)} new; "
                f"training on {len(train_records)}")
            _write_jsonl(tmp / "data" / "train.jsonl", train_records)
            _write_jsonl(tmp / "data" / "valid.jsonl", valid_records)
            summary = train_sft(base, train_records, valid_records, sft_cfg, tmp)
            return {"stage": "star", "isolation": isolation, "round": r,
                    "data": {**data, "train_hash": _hash_json(train_records),
                             "valid_source": valid_source, "new_examples": len(fresh)},
                    "rft": {k: v for k, v in got.items() if k != "records"},
                    "sampled_from": str(prev.path),
                    "hyperparameters": dataclasses.asdict(cfg), "summary": summary}

        art = build_artifact(f"{condition}{r}", parts, base, out_root, build, log)
        arts.append(art)
        accumulated = [json.loads(line) for line in
                       (art.path / "data" / "train.jsonl").read_text().splitlines() if line]
    return arts


# -------------------------------------------------------------------------------------------
# CLI: `jacrl train`
# -------------------------------------------------------------------------------------------


def _parse_sets(items: Sequence[str]) -> dict[str, str]:
    out = {}
    for it in items:
        k, sep, v = it.partition("=")
        if not sep:
            raise ValueError(f"--set expects key=value, got {it!r}")
        out[k.strip()] = v.strip()
    return out


def _strip(tasks) -> list[dict]:
    return [{"prompt": t["prompt"], "answer": t["answer"]} for t in tasks]


def _rung_tasks(n: str, data_dir: str) -> tuple[list[dict], list[dict] | None]:
    """Rung n of the train pool, validated on the `valid` split when there is one."""
    from jacrl import splits

    train = splits.rung(int(n) if str(n).isdigit() else n, data_dir=data_dir)
    try:
        valid = splits.load_split("valid", data_dir=data_dir)
    except FileNotFoundError:
        valid = None
    return _strip(train), _strip(valid) if valid else None


def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    p.add_argument("stage", choices=sorted(CONFIGS), help="training stage")
    p.add_argument("--model", default="jac-tiny", help="registry name or MLX model dir")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--rung", default=None, help="train on rung N of the train pool (or 'all')")
    src.add_argument("--split", default=None, help="train on a named split")
    src.add_argument("--tasks", default=None, help="train on a tasks.jsonl file")
    p.add_argument("--valid", default=None, help="valid tasks.jsonl (default: the rung's / "
                                                 "split 'valid' when using --rung)")
    p.add_argument("--data-dir", default=None, help="the data dir (default: the project's data/)")
    p.add_argument("--parent", default=None, help="artifact dir to chain from (grpo: continue "
                                                  "its adapter; rft: sample from it)")
    p.add_argument("--condition", default=None, help="condition label (default: the stage)")
    p.add_argument("--out-root", default=None,
                   help="where artifacts are stored (default: the project's artifacts/)")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a hyperparameter (dotted for nested, e.g. sft.iters=50); "
                        "JACRL_<STAGE>_<FIELD> env vars apply first")
    p.add_argument("--show-config", action="store_true", help="print the knobs and exit")
    return p


def run(args: argparse.Namespace) -> int:
    """`jacrl train STAGE ...`: train (or reuse) one artifact and print its path and key."""
    cls = CONFIGS[args.stage]
    cfg = configure(configure(cls(), env=os.environ), _parse_sets(args.sets))
    if args.show_config:
        print(config_help(cls))
        print(json.dumps(dataclasses.asdict(cfg), indent=1))
        return 0
    if args.rung is not None:
        train_tasks, valid_tasks = _rung_tasks(args.rung, args.data_dir)
    elif args.split is not None:
        from jacrl import splits

        train_tasks, valid_tasks = _strip(splits.load_split(args.split, data_dir=args.data_dir)), None
    elif args.tasks is not None:
        from jacrl.evaluate import read_task_file

        train_tasks, valid_tasks = read_task_file(args.tasks), None
    else:
        raise ValueError("give --rung N, --split NAME or --tasks FILE")
    if args.valid:
        from jacrl.evaluate import read_task_file

        valid_tasks = read_task_file(args.valid)
    parent = Artifact.load(args.parent) if args.parent else None
    kw = {"condition": args.condition or args.stage}
    if args.stage in ("grpo", "rft"):
        kw["parent"] = parent
    elif parent is not None:
        raise ValueError(f"--parent is not used by {args.stage}")
    fn = {"sft": sft, "rft": rft, "grpo": grpo, "star": star}[args.stage]
    out = fn(args.model, train_tasks, valid_tasks, cfg, args.out_root, **kw)
    for a in out if isinstance(out, list) else [out]:
        print(json.dumps({"path": str(a.path), "key": a.key, "reused": a.reused,
                          "base_model": str(a.base_model)}))
    return 0


def add_cli(subparsers) -> None:
    """Register `train` on an argparse subparsers object (for jacrl.cli)."""
    p = subparsers.add_parser("train", help="train (or reuse) a content-addressed LoRA artifact",
                              description=run.__doc__)
    add_arguments(p).set_defaults(func=run)
