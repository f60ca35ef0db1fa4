"""jacrl.train on the real jac-tiny model with real jaclang: SFT memorizes one task (the plumbing
smoke test), content addressing, RFT keeps only verified samples, GRPO updates and logs."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time

import pytest
from quick import QUICK

from jacrl import evaluate as ev
from jacrl import stages
from jacrl import train as tr
from jacrl.config import (
    DEFAULT_FORMULA,
    EvalConfig,
    GRPOConfig,
    RFTConfig,
    SFTConfig,
    STaRConfig,
    config_help,
    configure,
    env_formula,
    from_dict,
)
from jacrl.generate import generate_best_of_k
from jacrl.prompts import SYSTEM_PROMPT
from jacrl.ruler.reward import jac_behavioral, reward_function, score_completions
from jacrl.tasks.record import gold_records
from jacrl.train import artifacts, mlx_compat

# Enough to make jac-tiny memorize one body. Measured with `sft_loss` on the current jac-tiny
# (val loss 5.53), LR 2e-4, LoRA on every linear layer: greedy decoding reproduces this task's
# answer from step 30 (seed 0; loss 1.08 there, 0.47 at step 100), and a 165-token rung-1 body
# from step 50-70 (seeds 0 and 1, rank 16 or 64). The loss floors near 0.5: LoRA cannot change the
# final norm or the tied embeddings that bound the logits. LRs >= 4e-4 at scale 20 make greedy
# decoding unstable or diverge (rank 16); on the first, weaker build of jac-tiny (val loss 6.6) it
# took ~400 steps with LoRA kept off q/k.
MEMORIZE = SFTConfig(
    iters=100,
    learning_rate=2e-4,
    warmup=0,
    decay_steps=10**9,
    batch_size=1,
    lora_layers=-1,
    lora_rank=16,
    lora_scale=20.0,
    grad_checkpoint=False,
    steps_per_report=20,
    steps_per_eval=10**6,
    val_batches=1,
)


@pytest.fixture(scope="module")
def out_root(tmp_path_factory):
    return tmp_path_factory.mktemp("artifacts")


def _gold_len(task) -> int:
    return len(json.loads(task["answer"])["gold"])


@pytest.fixture(scope="module")
def one_task(harness_tasks):
    """The harness task with the fewest tokens (299 in all, 38 in the answer, with jac-tiny's
    tokenizer): the cheapest to memorize."""
    by_id = {json.loads(t["answer"])["id"]: t for t in harness_tasks}
    return by_id.get("lib_harness_clamp_partial") or min(
        harness_tasks, key=lambda t: _gold_len(t) + len(t["prompt"])
    )


def _prebuild_with_fast_blas(tiny, task, cfg, out_root) -> bool:
    """When this process runs on MLX's slow reference BLAS (LD_PRELOAD is read only at process
    start), build the artifact in a child process that has OpenBLAS preloaded; the in-process
    call then finds it by its content key. Returns whether a child built it."""
    from jacrl.blas import fast_blas_env

    extra = fast_blas_env()
    if not extra or os.environ.get("LD_PRELOAD"):
        return False
    spec = out_root / "memorize.json"
    spec.write_text(json.dumps({"model": tiny, "task": task, "cfg": dataclasses.asdict(cfg)}))
    code = (
        "import json, sys; from jacrl import train as tr; from jacrl.config import SFTConfig, "
        "from_dict; s = json.load(open(sys.argv[1])); "
        "tr.sft(s['model'], [s['task']], None, from_dict(SFTConfig, s['cfg']), "
        "sys.argv[2], log=lambda m: None)"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(spec), str(out_root)],
        check=True,
        env={**os.environ, **extra},
        timeout=900,
        stdout=subprocess.DEVNULL,
    )
    return True


@pytest.fixture(scope="module")
def memorized(tiny, one_task, out_root):
    t0 = time.time()
    child = _prebuild_with_fast_blas(tiny, one_task, MEMORIZE, out_root)
    art = tr.sft(tiny, [one_task], None, MEMORIZE, out_root)
    assert art.reused == child  # a child's build is found by key, across processes
    art.manifest["_test_wall_s"] = time.time() - t0
    return art


def test_sft_memorizes_one_task(tiny, one_task, memorized):
    art = memorized
    assert (art.path / "COMPLETE").is_file() and (art.path / "adapters.safetensors").is_file()
    m = art.manifest
    assert m["key"] == art.key and art.path.name == f"sft-{art.key[:16]}"
    assert m["data"]["valid_source"].startswith("train set")  # no valid tasks given: said so
    assert m["summary"]["train_examples"] == 1 and m["summary"]["batch_size"] == 1
    cfg = json.loads((art.path / "adapter_config.json").read_text())
    assert cfg["fine_tune_type"] == "lora" and cfg["lora_parameters"]["rank"] == 16
    rec = json.loads((art.path / "data" / "train.jsonl").read_text().splitlines()[0])
    assert [x["role"] for x in rec["messages"]] == ["system", "user", "assistant"]
    assert rec["messages"][0]["content"] == SYSTEM_PROMPT
    assert rec["messages"][2]["content"].startswith("```jac\n")
    losses = [json.loads(x) for x in (art.path / "metrics.jsonl").read_text().splitlines()]
    assert any(x["event"] == "train" for x in losses) and any(x["event"] == "val" for x in losses)
    row = ev.evaluate(
        tiny, art.adapter_path, [one_task], EvalConfig(n=0, max_tokens=256), kind="mem"
    )
    print(
        f"\nSFT {MEMORIZE.iters} iters: {m['summary']['train_s']:.1f}s train, "
        f"{m['_test_wall_s']:.1f}s wall; eval {row['seconds']}"
    )
    assert row["pass1"] == 1 and row["pass1_pct"] == 100.0, row["per_task"]
    assert row["artifact"] == art.key and row["truncation_pct"] == 0.0


def test_sft_loss_scores_the_answer_only(tiny, one_task):
    """sft_loss scores exactly the answer tokens (mlx-lm's default_loss also scores the padding
    token after each sequence), and skipping the prompt's logits does not change the loss."""
    import mlx.core as mx
    from mlx import nn
    from mlx_lm.tuner.datasets import ChatDataset
    from mlx_lm.tuner.trainer import default_loss

    from jacrl.models.registry import load

    model, tok = load(tiny)
    other = {**one_task, "prompt": one_task["prompt"] + "\n# and a longer prompt\n" * 3}
    data = [
        ChatDataset(gold_records([t]), tok, mask_prompt=True).process(gold_records([t])[0])
        for t in (one_task, other)
    ]
    assert mlx_compat.sliced_head_ok(model, data[0][0])
    plain = next(mlx_compat.iterate_all(data, 2, 2048))
    skipping = next(mlx_compat.iterate_all(data, 2, 2048, head_skip=64))
    assert len(plain) == 2 and len(skipping) == 3 and skipping[2].shape[0] > 0
    assert skipping[2].shape[0] % 64 == 0 and skipping[2].shape[0] < min(o for _, o in data)
    loss, ntoks = mlx_compat.sft_loss(model, *plain)
    loss2, ntoks2 = mlx_compat.sft_loss(model, *skipping)
    answer = sum(len(toks) - off for toks, off in data)  # the answer + <|im_end|> + "\n"
    assert ntoks.item() == ntoks2.item() == answer
    assert default_loss(model, *plain)[1].item() == answer + 2  # one pad per sequence
    assert abs(loss.item() - loss2.item()) < 1e-4
    toks, off = data[0]  # by hand: the mean cross-entropy of the answer tokens
    logits = model(mx.array([toks[:-1]]))[0, off - 1 :]
    want = nn.losses.cross_entropy(logits, mx.array(toks[off:])).mean().item()
    one = next(mlx_compat.iterate_all(data[:1], 1, 2048, head_skip=64))
    assert abs(mlx_compat.sft_loss(model, *one)[0].item() - want) < 1e-4


def test_best_of_k_returns_a_running_body(tiny, one_task, memorized):
    r = generate_best_of_k(tiny, memorized.adapter_path, one_task, k=2, temperature=0.3)
    assert r["accepted"] and r["index"] is not None and r["check"] == "exact"
    assert score_completions([r["completion"]], [one_task["answer"]])[0].exact


def test_content_addressing_reuses_and_retrains(tiny, harness_tasks, out_root):
    a, b = harness_tasks[0], harness_tasks[1]
    first = tr.sft(tiny, [a], [b], QUICK, out_root)
    assert not first.reused
    t0 = time.time()
    again = tr.sft(tiny, [a], [b], QUICK, out_root)
    assert again.reused and again.key == first.key and again.path == first.path
    assert time.time() - t0 < 5  # no training happened
    assert again.manifest["created"] == first.manifest["created"]
    # a hyperparameter change, a data change, another condition: new keys, retrained
    lr = tr.sft(tiny, [a], [b], configure(QUICK, {"learning_rate": "2e-3"}), out_root)
    data = tr.sft(tiny, [b], [a], QUICK, out_root)
    cond = tr.sft(tiny, [a], [b], QUICK, out_root, condition="gold")
    keys = {first.key, lr.key, data.key, cond.key}
    assert len(keys) == 4 and not (lr.reused or data.reused or cond.reused)
    assert cond.path.name.startswith("gold-")
    # never trust a name: a complete dir with another key under this name is rebuilt ...
    m = json.loads((first.path / "manifest.json").read_text())
    m["key"] = "0" * 64
    (first.path / "manifest.json").write_text(json.dumps(m))
    rebuilt = tr.sft(tiny, [a], [b], QUICK, out_root)
    assert not rebuilt.reused and rebuilt.key == first.key
    # ... and so is a killed build (no COMPLETE marker)
    (rebuilt.path / "COMPLETE").unlink()
    redone = tr.sft(tiny, [a], [b], QUICK, out_root)
    assert not redone.reused and (redone.path / "COMPLETE").is_file()
    # loading by path
    loaded = tr.Artifact.load(redone.path)
    assert loaded.key == redone.key and loaded.base_model == redone.base_model


def test_rft_keeps_only_verified_samples(
    tiny, one_task, harness_tasks, memorized, out_root, monkeypatch
):
    other = next(t for t in harness_tasks if t is not one_task)
    cfg = RFTConfig(
        samples=4, temperature=0.2, threshold=1.0, per_task=0, max_tokens=128, sft=QUICK
    )
    monkeypatch.setenv("JACRL_REWARD_FORMULA", "v3")  # grading must use cfg's, not read this
    t0 = time.time()
    art = tr.rft(tiny, [one_task, other], None, cfg, out_root, parent=memorized)
    print(f"\nRFT (2 tasks x 4 samples + {QUICK.iters} SFT iters): {time.time() - t0:.1f}s")
    info = art.manifest["rft"]
    assert info["total"] == 8 and 1 <= info["kept"] <= info["passing"] <= 8
    assert info["reward_formula"] == cfg.reward_formula
    assert art.manifest["isolation"] == "sandbox"
    assert info["per_task"][json.loads(other["answer"])["id"]] == 0  # never saw its gold
    assert art.manifest["key_parts"]["parent"] == memorized.key
    kept = [json.loads(x) for x in (art.path / "data" / "train.jsonl").read_text().splitlines()]
    assert len(kept) == info["kept"]
    answers = {r["prompt"]: r["answer"] for r in (one_task, other)}
    scored = score_completions(
        [k["messages"][2]["content"] for k in kept],
        [answers[k["messages"][1]["content"]] for k in kept],
        formula=cfg.reward_formula,
    )
    assert all(s.score == 1.0 for s in scored)  # only verified bodies were stored


def test_grpo_updates_weights_and_logs_metrics(tiny, harness_tasks, out_root):
    import mlx.core as mx

    cfg = GRPOConfig(
        iters=2,
        learning_rate=1e-3,
        beta=0.04,
        group_size=4,
        batch_size=1,
        max_completion_length=64,
        lora_layers=2,
        grad_checkpoint=False,
        steps_per_report=1,
        temperature=1.0,
        min_group_span=0.0,
    )
    t0 = time.time()
    art = tr.grpo(tiny, harness_tasks[:2], None, cfg, out_root)
    wall = time.time() - t0
    print(
        f"\nGRPO {cfg.iters} iters: {wall:.1f}s wall, {art.manifest['summary']['s_per_iter']}"
        " s/iter"
    )
    assert art.manifest["isolation"] == "sandbox"
    w = mx.load(str(art.path / "adapters.safetensors"))
    lora_b = [v for k, v in w.items() if k.endswith("lora_b")]
    assert lora_b and any(mx.abs(v).max().item() > 0 for v in lora_b)  # B starts at zero
    rows = [json.loads(x) for x in (art.path / "metrics.jsonl").read_text().splitlines()]
    train_rows = [r for r in rows if r["event"] == "train"]
    assert len(train_rows) == cfg.iters
    for r in train_rows:
        for key in ("reward_mean", "reward_std", "kl", "truncated", "loss"):
            assert r[key] is not None and r[key] == r[key], key  # present, not NaN
        assert 0.0 <= r["truncated"] <= 1.0 and r["kl"] >= 0.0
    s = art.manifest["summary"]
    assert s["reference_model"] == "base" and s["truncated_mean"] is not None
    assert s["reference_weights"] == "shared"  # a view over the policy, no second copy
    assert art.manifest["hyperparameters"]["max_completion_length"] == 64
    # every rollout kept, consistent with the step records and the trainer's own reward mean
    rollouts = [json.loads(x) for x in (art.path / "rollouts.jsonl").read_text().splitlines()]
    steps = [r for r in rows if r["event"] == "step"]
    assert [r["step"] for r in steps] == [1, 2] and len(rollouts) == 2 * cfg.group_size
    for st, tr_row in zip(steps, train_rows, strict=True):
        mine = [r for r in rollouts if r["step"] == st["step"]]
        mean = sum(r["reward"] for r in mine) / len(mine)
        assert mean == pytest.approx(st["reward_mean"], abs=1e-5)
        assert mean == pytest.approx(tr_row["reward_mean"], abs=1e-4)  # mlx-lm-lora's own
        assert sum(r["advantage"] for r in mine) == pytest.approx(0.0, abs=1e-5)  # centred
        assert all(st[k] >= 0 for k in ("generation_s", "reward_s", "update_s"))
    for r in rollouts:
        assert set(r) >= {
            "step",
            "task_id",
            "completion",
            "body",
            "tier",
            "reward",
            "advantage",
            "truncated",
            "tokens",
        }
        assert r["truncated"] == (r["tokens"] >= 64 and r["tier"] is not None and r["truncated"])
    assert s["advantage"] == "centered" and s["temperature"] == 1.0
    assert set(s["seconds"]) == {"generation_s", "reward_s", "update_s"}


def test_grpo_chains_from_sft(tiny, harness_tasks, memorized, one_task, out_root):
    cfg = GRPOConfig(
        iters=1,
        learning_rate=1e-4,
        group_size=2,
        max_completion_length=32,
        grad_checkpoint=False,
        steps_per_report=1,
    )
    art = tr.grpo(tiny, [one_task], None, cfg, out_root, parent=memorized, condition="sft_grpo")
    assert art.path.name.startswith("sft_grpo-")
    assert art.manifest["key_parts"]["parent"] == memorized.key
    s = art.manifest["summary"]
    assert s["adapter"] == json.loads((memorized.path / "adapter_config.json").read_text())
    assert s["reference_model"] == "base + parent adapter"


def test_star_rounds_chain_and_accumulate(tiny, one_task, out_root, monkeypatch):
    cfg = STaRConfig(rounds=1, samples=2, temperature=1.0, max_tokens=48, sft=QUICK)
    monkeypatch.setenv("JACRL_REWARD_FORMULA", "v3")  # grading must use cfg's, not read this
    arts = tr.star(tiny, [one_task], None, cfg, out_root)
    assert len(arts) == 2 and arts[0].path.name.startswith("star0-")
    r1 = arts[1].manifest
    assert r1["key_parts"]["parent"] == arts[0].key and r1["round"] == 1
    assert r1["rft"]["total"] == 2 and r1["rft"]["reward_formula"] == cfg.reward_formula
    train = (arts[1].path / "data" / "train.jsonl").read_text().splitlines()
    assert len(train) == 1 + r1["data"]["new_examples"]  # gold + new verified bodies
    assert [a.key for a in tr.star(tiny, [one_task], None, cfg, out_root)] == [a.key for a in arts]


def test_configure_overrides_and_env():
    cfg = configure(RFTConfig(), {"samples": "3", "sft.iters": 7, "sft.grad_checkpoint": "0"})
    assert cfg.samples == 3 and cfg.sft.iters == 7 and cfg.sft.grad_checkpoint is False
    env = {"JACRL_GRPO_BETA": "0", "JACRL_GRPO_ITERS": "9", "JACRL_RFT_SFT_LEARNING_RATE": "1e-4"}
    g = configure(GRPOConfig(), env=env, prefix="JACRL_GRPO_")
    assert g.beta == 0.0 and g.iters == 9
    assert stages.resolve("rft", "dependent", env).sft.learning_rate == 1e-4
    with pytest.raises(TypeError, match="needs its prefix"):
        configure(GRPOConfig(), env=env)
    with pytest.raises(KeyError):
        configure(SFTConfig(), {"itres": 3})
    assert SFTConfig().iters == 200 and GRPOConfig().learning_rate == 1e-6
    assert all("help" in f.metadata for f in dataclasses.fields(GRPOConfig))
    assert "beta" in config_help(GRPOConfig)


# -------------------------------------------------------------------------------------------
# the reward formula is a keyed hyperparameter, never read from the environment mid-training
# -------------------------------------------------------------------------------------------

REWARD_CONFIGS = (GRPOConfig, RFTConfig, STaRConfig)


def test_formula_default_is_a_value_and_the_env_is_read_at_the_edge(monkeypatch):
    """A config's formula defaults to DEFAULT_FORMULA whatever the environment; the edge (the
    CLI, the ladder's from_env: `stages.resolve` with `env_formula`) reads JACRL_REWARD_FORMULA
    once, and a stage's own JACRL_<STAGE>_REWARD_FORMULA wins over it."""
    monkeypatch.setenv("JACRL_REWARD_FORMULA", "additive")
    assert [c().reward_formula for c in REWARD_CONFIGS] == [DEFAULT_FORMULA] * 3
    env = {"JACRL_REWARD_FORMULA": "additive"}
    made = [stages.resolve(s, env_formula(env), env) for s in ("grpo", "rft", "star")]
    assert [c.reward_formula for c in made] == ["additive"] * 3
    assert from_dict(GRPOConfig, dataclasses.asdict(made[0])).reward_formula == "additive"
    env = {**env, "JACRL_GRPO_REWARD_FORMULA": "tiered"}  # the per-stage variable wins
    assert stages.resolve("grpo", env_formula(env), env).reward_formula == "tiered"
    assert env_formula({}) == DEFAULT_FORMULA
    assert not hasattr(SFTConfig(), "reward_formula")  # SFT never calls the reward


def test_formula_is_part_of_the_artifact_key(tiny):
    from jacrl.models.registry import resolve

    base = resolve(tiny)
    for cls in REWARD_CONFIGS:
        keys = {
            f: artifacts.artifact_key(
                artifacts.key_parts("c", "grpo", base, {"train": "x"}, cls(reward_formula=f), None)
            )
            for f in ("tiered", "additive")
        }
        assert keys["tiered"] != keys["additive"], cls.__name__


def test_unknown_formula_is_a_one_line_error(monkeypatch, capsys):
    from jacrl.cli import main

    for make in (
        lambda: GRPOConfig(reward_formula="v3"),
        lambda: configure(RFTConfig(), {"reward_formula": "v3"}),
        lambda: STaRConfig(reward_formula=""),
        lambda: reward_function("v3"),
    ):
        with pytest.raises(ValueError, match="choose from dependent, tiered, additive") as e:
            make()
        assert "\n" not in str(e.value)
    capsys.readouterr()
    assert main(["train", "grpo", "--set", "reward_formula=v3"]) == 2
    assert capsys.readouterr().err == (
        "jacrl: train: unknown reward formula 'v3'; choose from dependent, tiered, additive\n"
    )
    monkeypatch.setenv("JACRL_REWARD_FORMULA", "v3")
    with pytest.raises(ValueError, match=r"^JACRL_REWARD_FORMULA='v3' is not a reward formula"):
        env_formula(os.environ)
    assert GRPOConfig().reward_formula == DEFAULT_FORMULA  # a config never reads it
    assert main(["train", "rft", "--show-config"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jacrl: train: JACRL_REWARD_FORMULA='v3'") and err.count("\n") == 1


def test_bound_reward_ignores_the_env_at_call_time(harness, monkeypatch):
    d, answer = harness["osp_harness_tally_walker"]
    completions = [d.gold, "return 0;"]
    want = {
        f: [s.score for s in score_completions(completions, [answer], formula=f)]
        for f in ("tiered", "additive")
    }
    assert want["tiered"] != want["additive"]
    monkeypatch.setenv("JACRL_REWARD_FORMULA", "v3")  # any read of it now raises
    for f in ("tiered", "additive"):
        fn = reward_function(f)
        assert fn.__name__ == "jac_behavioral" and fn.formula == f  # mlx-lm-lora's metric name
        got = fn(prompts=["p"] * 2, completions=completions, answer=[answer] * 2, types=None)
        assert got == want[f]
    # unbound (mlx-lm-lora's CLI path): the default formula, the environment never read
    assert jac_behavioral(["p"] * 2, completions, [answer] * 2) == [
        s.score for s in score_completions(completions, [answer], formula=DEFAULT_FORMULA)
    ]


def test_grpo_artifact_keyed_by_formula_not_env(tiny, harness_tasks, out_root, monkeypatch):
    """A 1-step GRPO per formula: the other formula's cached artifact is never reused, and
    training never reads JACRL_REWARD_FORMULA (set to garbage while it runs)."""
    tiered = GRPOConfig(
        iters=1,
        learning_rate=1e-4,
        beta=0.0,
        group_size=2,
        max_completion_length=16,
        lora_layers=1,
        lora_rank=4,
        grad_checkpoint=False,
        steps_per_report=1,
        reward_formula="tiered",
    )
    additive = dataclasses.replace(tiered, reward_formula="additive")
    monkeypatch.setenv("JACRL_REWARD_FORMULA", "v3")
    t = tr.grpo(tiny, harness_tasks[:1], None, tiered, out_root, condition="formula")
    a = tr.grpo(tiny, harness_tasks[:1], None, additive, out_root, condition="formula")
    assert not t.reused and not a.reused and a.key != t.key and a.path != t.path
    for art, f in ((t, "tiered"), (a, "additive")):
        m = art.manifest
        assert m["key_parts"]["hyperparameters"]["reward_formula"] == f
        assert m["summary"]["reward_formula"] == f
        rows = [json.loads(x) for x in (art.path / "rollouts.jsonl").read_text().splitlines()]
        # the rollouts were scored with the artifact's formula, not the environment's
        again = score_completions(
            [r["completion"] for r in rows], [harness_tasks[0]["answer"]] * len(rows), formula=f
        )
        assert [r["reward"] for r in rows] == [s.score for s in again]
    again = tr.grpo(tiny, harness_tasks[:1], None, tiered, out_root, condition="formula")
    assert again.reused and again.key == t.key


def test_training_refuses_without_a_sandbox(tiny, harness_tasks, tmp_path, monkeypatch):
    """No sandbox and no opt-in: GRPO stops before any work with the one-line reason."""
    from jacrl.executor import Executor, SandboxUnavailable
    from jacrl.ruler import reward

    monkeypatch.delenv("JACRL_ALLOW_UNSANDBOXED", raising=False)
    monkeypatch.setattr(reward, "_EXECUTOR", Executor(isolation="rlimits-only"))
    with pytest.raises(SandboxUnavailable, match="JACRL_ALLOW_UNSANDBOXED"):
        tr.grpo(tiny, harness_tasks[:1], None, GRPOConfig(iters=1), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_advantage_variants_on_hand_made_groups():
    """centered = r - group mean; std = that / (σ + 1e-4), as mlx-lm-lora computes it; a group of
    equal rewards gets 0 either way; a 0.0005 spread becomes ±0.71 under std (noise as an update)
    but stays ±0.00025 centred, and min_group_span skips it (DAPO's filter)."""
    import numpy as np

    from jacrl.train.grpo_rollouts import group_advantages

    rewards = [1.0, 0.0, 0.5, 0.5, 0.3, 0.3, 0.3, 0.3, 0.0100, 0.0105, 0.0100, 0.0105]
    groups = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    centred, skipped = group_advantages(rewards, groups, "centered")
    assert np.allclose(centred[:4], [0.5, -0.5, 0.0, 0.0]) and skipped == pytest.approx(1 / 3)
    assert np.allclose(centred[4:8], 0.0)  # equal rewards: no signal, counted as skipped
    assert np.allclose(centred[8:], [-0.00025, 0.00025, -0.00025, 0.00025])
    std, _ = group_advantages(rewards, groups, "std")
    g = np.array(rewards[:4])
    assert np.allclose(std[:4], (g - g.mean()) / (g.std() + 1e-4))
    assert np.allclose(std[8:], np.array([-1, 1, -1, 1]) * 0.00025 / (0.00025 + 1e-4))
    assert min(abs(std[8:])) > 0.7  # the amplified noise: a 0.0005 spread, a ±0.71 advantage
    filtered, skipped = group_advantages(rewards, groups, "centered", min_span=0.01)
    assert np.allclose(filtered[8:], 0.0) and skipped == pytest.approx(2 / 3)
    assert np.allclose(filtered[:4], centred[:4])
    with pytest.raises(ValueError, match="unknown advantage"):
        group_advantages(rewards, groups, "whitened")


def test_grpo_from_a_memorized_adapter_keeps_greedy_mem(tiny, memorized, one_task, out_root):
    """A demo-sized GRPO stage (the demo's settings: LR 1e-5, groups of 2, 4 steps; the rollout
    temperature calibrated, centred advantages) from an adapter that reproduces its task greedily
    still reproduces it: GRPO at these defaults does no harm to what SFT taught."""
    from jacrl.generate import generate
    from jacrl.ladder.demo import DEMO_GRPO
    from jacrl.models.registry import load
    from jacrl.ruler.reward import score_completions

    cfg = configure(GRPOConfig(), {**DEMO_GRPO, "iters": 4, "max_completion_length": 64})
    art = tr.grpo(tiny, [one_task], None, cfg, out_root, parent=memorized, condition="keeps_mem")
    s = art.manifest["summary"]
    assert s["temperature"] in cfg.temperature_grid and s["temperature_calibration"]
    for adapter in (memorized.adapter_path, art.adapter_path):
        lm, tok = load(tiny, str(adapter))
        text = generate(lm, tok, [one_task["prompt"]], max_tokens=64)[0][0].text
        assert score_completions([text], [one_task["answer"]])[0].exact, (adapter, text)


def test_keep_best_by_reward_keeps_the_adapter_whose_greedy_answers_scored_best(
    tiny, harness_tasks, tmp_path
):
    """sft.best_by=reward: every validation logs the mean tiered reward of the greedy answers to
    the valid tasks; the adapter kept is the one of the highest (ties: the lower loss), the
    summary names its iteration and reward, and the saved adapter, loaded afresh, scores that
    reward again. Asking for it without keep_best, validations or valid tasks is one error."""
    from jacrl.models.registry import load
    from jacrl.train.sft import graded_reward

    cfg = dataclasses.replace(
        QUICK,
        iters=6,
        learning_rate=3e-2,
        steps_per_eval=2,
        keep_best=True,
        best_by="reward",
        graded_valid=2,
        val_batches=-1,
    )
    tasks = harness_tasks[:2]
    art = tr.sft(tiny, tasks, tasks, cfg, tmp_path, log=lambda _: None)
    s = art.manifest["summary"]
    vals = [json.loads(x) for x in (art.path / "metrics.jsonl").read_text().splitlines()]
    vals = [v for v in vals if v["event"] == "val"]
    assert len(vals) >= 3 and all("val_reward" in v for v in vals)
    top = max(vals, key=lambda v: (v["val_reward"], -v["val_loss"]))
    assert (s["best_by"], s["best_iter"], s["best_val_reward"]) == (
        "reward",
        top["iteration"],
        top["val_reward"],
    )
    model, tok = load(tiny, str(art.adapter_path), fresh=True)
    assert graded_reward(model, tok, tasks) == pytest.approx(s["best_val_reward"], abs=1e-6)
    bad = dataclasses.replace(cfg, keep_best=False)
    with pytest.raises(ValueError, match="best_by=reward needs keep_best, steps_per_eval > 0"):
        tr.sft(tiny, tasks, tasks, bad, tmp_path / "bad", log=lambda _: None)
    with pytest.raises(ValueError, match="best_by must be loss or reward, not 'val'"):
        dataclasses.replace(cfg, best_by="val")


def test_best_weights_ranks_by_reward_then_loss():
    """BestWeights with a grader keeps the weights of the highest reward, a tie going to the
    lower loss (here the loss rule would keep the first, the reward rule the second); without
    one, the lowest loss. Each validation's reward goes into its log record."""
    import mlx.core as mx
    import mlx.nn as nn

    from jacrl.train.sft import BestWeights

    class Log:
        def __init__(self):
            self.val = []

        def on_val_loss_report(self, info):
            self.val.append(info)

    def run(grade):
        model, log = nn.Linear(2, 2), Log()
        best = BestWeights(log, model, grade)
        for it, loss in enumerate([1.0, 2.0, 3.0, 0.5]):
            model.weight = mx.full((2, 2), float(it))
            best.on_val_loss_report({"iteration": it, "val_loss": loss})
        return best, log

    rewards = iter([0.1, 0.5, 0.5, 0.2])
    best, log = run(lambda m: next(rewards))
    assert (best.iter, best.reward, best.loss) == (1, 0.5, 2.0)
    assert best.weights["weight"].tolist() == [[1.0, 1.0], [1.0, 1.0]]
    assert [v["val_reward"] for v in log.val] == [0.1, 0.5, 0.5, 0.2]
    best, log = run(None)
    assert (best.iter, best.reward, best.loss) == (3, None, 0.5)
    assert "val_reward" not in log.val[0]


def test_keep_best_keeps_the_adapter_of_the_lowest_validation_loss(tiny, harness_tasks, tmp_path):
    """sft.keep_best: the adapter saved is the one whose validation loss was lowest — the
    summary names the iteration and loss the metrics log shows as the minimum, and the saved
    adapter, loaded afresh, scores that loss again on the valid set."""
    import mlx.core as mx
    from mlx_lm.tuner.datasets import CacheDataset, ChatDataset
    from mlx_lm.tuner.trainer import evaluate as mlx_evaluate

    from jacrl.models.registry import load

    cfg = dataclasses.replace(
        QUICK, iters=6, learning_rate=3e-2, steps_per_eval=2, keep_best=True, val_batches=-1
    )
    art = tr.sft(tiny, harness_tasks[:2], harness_tasks[2:4], cfg, tmp_path, log=lambda _: None)
    s = art.manifest["summary"]
    vals = [json.loads(x) for x in (art.path / "metrics.jsonl").read_text().splitlines()]
    vals = [(v["val_loss"], v["iteration"]) for v in vals if v["event"] == "val"]
    assert len(vals) >= 3  # iteration 0, every 2, before the last
    loss, it = min(vals)
    assert it != vals[-1][1]  # the premise: the best is not the last (lr 3e-2 overshoots)
    assert s["keep_best"] is True and s["best_iter"] == it
    assert s["best_val_loss"] == pytest.approx(loss, abs=1e-6)
    model, tok = load(tiny, str(art.adapter_path), fresh=True)
    valid = [json.loads(x) for x in (art.path / "data" / "valid.jsonl").read_text().splitlines()]
    ds = CacheDataset(ChatDataset(valid, tok, mask_prompt=True))
    again = mlx_evaluate(
        model, ds, batch_size=1, num_batches=-1, loss=mlx_compat.sft_loss, max_seq_length=2048
    )
    assert float(mx.array(again)) == pytest.approx(loss, rel=1e-4)


def _refresh_threads(join: bool = False) -> int:
    """rich's redraw threads alive (join: once those stopped have ended)."""
    import threading

    from rich.live import _RefreshThread

    threads = [t for t in threading.enumerate() if isinstance(t, _RefreshThread)]
    for t in threads if join else ():
        t.join(timeout=5)
    return sum(t.is_alive() for t in threads)


def test_mlx_lm_training_draws_no_live_bar_in_a_kernel(monkeypatch):
    """In a Jupyter kernel rich redraws mlx-lm's training bar as a widget ten times a second (a
    ladder cell's papermill once stopped reading that flood and hung); inside
    `no_live_bar_in_a_kernel` there it runs no redraw thread, while its report lines still
    print, and outside a kernel the bar is drawn as before."""
    import io

    from mlx_lm import cli_ui
    from mlx_lm.tuner import trainer
    from rich.console import Console

    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=80)
    monkeypatch.setattr(cli_ui, "make_console", lambda: console)
    drawn = cli_ui.make_train_progress
    with mlx_compat.no_live_bar_in_a_kernel(kernel=False), trainer.TrainUI(4) as ui:
        assert _refresh_threads() == 1  # the bar mlx-lm draws: the control
        ui.advance()
    assert _refresh_threads(join=True) == 0
    with mlx_compat.no_live_bar_in_a_kernel(kernel=True), trainer.TrainUI(4) as ui:
        assert _refresh_threads() == 0
        ui.advance()
        ui.report_train(1, 0.5, 100.0, 2000)
        with ui.val_task(2) as step:
            step()
    assert "0.500" in out.getvalue()  # the report line
    assert cli_ui.make_train_progress is drawn  # put back
    # rich's own test decides when none is given: a console it deems a kernel's
    monkeypatch.setattr(cli_ui, "make_console", lambda: Console(file=out, force_jupyter=True))
    with mlx_compat.no_live_bar_in_a_kernel():
        assert cli_ui.make_train_progress is not drawn
        with trainer.TrainUI(4) as ui:
            assert _refresh_threads() == 0
            ui.advance()
