"""jacrl.train.dpo on the real jac-tiny model with real jaclang: the pairs obey the rule (chosen
passes our verifier, rejected fails, highest-reward failure first), pairs.jsonl is kept and
browsable, DPO moves the parent's adapter against the parent as reference, and the artifact is
content-addressed like every other."""

from __future__ import annotations

import json

import pytest
from quick import QUICK as PARENT

from jacrl import train as tr
from jacrl.config import DPOConfig, configure
from jacrl.ruler.reward import score_completions
from jacrl.samples import SamplesError, browse_pairs, read_pairs
from jacrl.tasks.record import fenced, gold_body, task_id
from jacrl.train.dpo import build_pairs, require_pairs

# PARENT, the quick SFT config, is a barely trained parent: jac-tiny then fails most samples,
# so pairs exist; its chosen sides come mostly from the gold.
CFG = DPOConfig(
    samples=2,
    temperature=1.0,
    max_tokens=32,
    pairs_per_task=2,
    iters=2,
    learning_rate=1e-3,
    batch_size=1,
    steps_per_report=1,
)


@pytest.fixture(scope="module")
def out_root(tmp_path_factory):
    return tmp_path_factory.mktemp("dpo")


@pytest.fixture(scope="module")
def tasks(harness_tasks):
    by_id = {task_id(t): t for t in harness_tasks}
    return [by_id["arch_harness_account_deposit"], by_id["lib_harness_clamp_partial"]]


@pytest.fixture(scope="module")
def parent(tiny, tasks, out_root):
    return tr.sft(tiny, tasks, None, PARENT, out_root, log=lambda m: None)


@pytest.fixture(scope="module")
def built(tiny, tasks, parent, out_root):
    return tr.dpo(tiny, tasks, None, CFG, out_root, parent=parent, log=lambda m: None)


def _ranked(rows):
    by_task: dict[str, list[dict]] = {}
    for r in rows:
        by_task.setdefault(r["task"], []).append(r)
    return by_task


def test_pairs_rule_on_known_completions(tasks):
    """The rule on completions whose grades we know, through the real verifier: the first
    passing sample is chosen, distinct failures are rejected highest reward first."""
    task = tasks[0]
    gold = fenced(gold_body(task))
    runs = fenced("self.balance += amount;\nself.history.append(amount);\nreturn True;")
    broken = "```jac\nthis is ( not jac\n```"
    completions = [runs, gold, "", broken, runs, gold]
    rows, without = build_pairs([task], [completions], configure(CFG, {"pairs_per_task": 5}))
    assert without == []
    assert {r["chosen_source"] for r in rows} == {"sample 2"}  # the first pass, 1-based
    assert [r["rejected_sample"] for r in rows][0] == 1  # it runs: the nearest miss first
    assert sorted(r["rejected_sample"] for r in rows) == [1, 3, 4]  # sample 5 repeats sample 1
    rewards = [r["rejected_reward"] for r in rows]
    assert rewards == sorted(rewards, reverse=True) and [r["rank"] for r in rows] == [1, 2, 3]
    assert rows[0]["rejected_tier"] == "runs" and rows[-1]["rejected_tier"] == "empty"
    capped, _ = build_pairs([task], [completions], CFG)  # pairs_per_task 2: the two highest
    assert [r["rejected_sample"] for r in capped] == [r["rejected_sample"] for r in rows[:2]]


def test_no_failing_sample_gives_no_pair_and_the_error(tasks):
    gold = [[fenced(gold_body(t))] * 2 for t in tasks]
    rows, without = build_pairs(tasks, gold, CFG)
    assert rows == [] and without == [task_id(t) for t in tasks]
    with pytest.raises(RuntimeError, match="none of 2 tasks had a failing sample") as e:
        require_pairs(rows, len(tasks), CFG)
    assert "\n" not in str(e.value)


def test_dpo_pairs_are_verified_and_kept(built, tasks, parent):
    rows = read_pairs(built.path)  # the directory or its pairs.jsonl
    assert rows == read_pairs(built.path / "pairs.jsonl") and rows
    answers = {task_id(t): t["answer"] for t in tasks}
    chosen = score_completions(
        [r["chosen"] for r in rows], [answers[r["task"]] for r in rows], formula=CFG.reward_formula
    )
    rejected = score_completions(
        [r["rejected"] for r in rows],
        [answers[r["task"]] for r in rows],
        formula=CFG.reward_formula,
    )
    assert all(s.exact for s in chosen) and not any(s.exact for s in rejected)
    assert [round(s.score, 4) for s in rejected] == [r["rejected_reward"] for r in rows]
    for task, rs in _ranked(rows).items():
        assert len(rs) <= CFG.pairs_per_task and [r["rank"] for r in rs] == list(
            range(1, len(rs) + 1)
        )
        rewards = [r["rejected_reward"] for r in rs]
        assert rewards == sorted(rewards, reverse=True), task
        assert len({r["rejected"] for r in rs}) == len(rs)  # distinct failures
    p = built.manifest["pairs"]
    assert p["pairs"] == len(rows) and p["samples_total"] == CFG.samples * len(tasks)
    assert p["tasks_with_pair"] + len(p["tasks_without_pair"]) == len(tasks)
    margin = sum(r["chosen_reward"] - r["rejected_reward"] for r in rows) / len(rows)
    assert p["reward_margin_mean"] == pytest.approx(margin, abs=1e-4) and margin > 0
    assert built.manifest["determinism"].get("caveat")  # graded: the sandbox caveat applies
    summary = browse_pairs(rows)
    assert len(summary.splitlines()) == 1 + len(rows)
    detail = browse_pairs(rows, rows[0]["task"])
    assert "chosen (exact" in detail and "rejected (" in detail


def test_samples_cli_browses_pairs(built, capsys, tmp_path):
    from jacrl.cli import main

    rows = read_pairs(built.path)
    assert main(["samples", str(built.path / "pairs.jsonl")]) == 0
    assert capsys.readouterr().out.strip() == browse_pairs(rows)
    assert main(["samples", str(built.path), "--task", rows[0]["task"], "--show", "text"]) == 0
    out = capsys.readouterr().out
    assert all(line in out for line in rows[0]["chosen"].splitlines() if line.strip())
    bad = tmp_path / "pairs.jsonl"
    bad.write_text('{"task": "x"}\n')
    with pytest.raises(SamplesError, match=r"pairs.jsonl:1: not a DPO pair"):
        read_pairs(bad)


def test_dpo_continues_the_parent_against_it(built, parent):
    import mlx.core as mx

    m = built.manifest
    assert m["stage"] == "dpo" and m["key_parts"]["parent"] == parent.key
    assert built.path.name.startswith("sft_dpo-")
    s = m["summary"]
    assert s["adapter"] == json.loads((parent.path / "adapter_config.json").read_text())
    assert s["reference_model"] == "base + parent adapter"
    mine = mx.load(str(built.path / "adapters.safetensors"))
    theirs = mx.load(str(parent.path / "adapters.safetensors"))
    assert set(mine) == set(theirs)  # the same LoRA matrices, trained further
    assert any(not mx.array_equal(mine[k], theirs[k]).item() for k in mine)
    rows = [json.loads(x) for x in (built.path / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in rows if r["event"] == "train"]
    assert [r["iteration"] for r in train] == [1, 2] and all(r["stage"] == "dpo" for r in train)
    # Before the first update the policy is its reference: implicit rewards are exactly 0.
    assert train[0]["train_chosen_reward"] == 0.0 and train[0]["train_rejected_reward"] == 0.0
    assert train[-1]["train_margins"] != 0.0


def test_dpo_reuse_and_rekey(tiny, tasks, parent, built, out_root, tmp_path):
    again = tr.dpo(tiny, tasks, None, CFG, out_root, parent=parent, log=lambda m: None)
    assert again.reused and again.key == built.key
    other = tr.dpo(
        tiny,
        tasks,
        None,
        configure(CFG, {"beta": 0.2}),
        tmp_path,
        parent=parent,
        log=lambda m: None,
    )
    assert not other.reused and other.key != built.key
    # the same sampling inputs, seeded: the same pairs in another build
    assert read_pairs(other.path) == read_pairs(built.path)


def test_dpo_config_checks():
    with pytest.raises(ValueError, match="loss_type must be one of"):
        DPOConfig(loss_type="kto")
    with pytest.raises(ValueError, match="pairs_per_task must be >= 1"):
        DPOConfig(pairs_per_task=0)
    assert configure(DPOConfig(), {"beta": "0.5"}).beta == 0.5
    with pytest.raises(ValueError, match="dpop_lambda works inside the sigmoid"):
        DPOConfig(loss_type="ipo")  # the default dpop_lambda is 50
    assert DPOConfig(loss_type="ipo", dpop_lambda=0.0).loss_type == "ipo"
    with pytest.raises(ValueError, match="must be >= 0"):
        DPOConfig(rpo_alpha=-1.0)


def _loss_case(loss_fn, pc, **over):
    """loss_fn on one pair, by hand: policy chosen/rejected log-probs pc, -12, reference -9,
    -11, 5 chosen tokens (6 with the first, which the loss does not score), beta 0.1."""
    import mlx.core as mx

    masks = mx.ones((1, 6))
    args = {
        "policy_rejected_score": mx.array([-12.0]),
        "reference_chosen_score": mx.array([-9.0]),
        "reference_rejected_score": mx.array([-11.0]),
        "chosen_masks": masks,
        "rejected_masks": masks,
        "beta": 0.1,
        "delta": 50.0,
        "loss_type": "sigmoid",
        **over,
    }
    return mx.value_and_grad(lambda c: loss_fn(policy_chosen_score=c, **args)[0])(mx.array([pc]))


def test_the_terms_that_keep_the_chosen_likely_by_hand():
    """dpo_loss's terms on a pair worked out by hand. The chosen answer fell by 1 nat under the
    policy (-10 against the reference's -9) and the rejected one by 1 (-12 against -11): DPO's
    logits are 0, so plain DPO sees nothing wrong (loss log 2, d/dchosen = -beta/2). RPO adds
    alpha * NLL / tokens = 1 * 10 / 5 and -alpha/5 to the gradient; DPO-Positive subtracts
    lambda * 1 inside the sigmoid: loss softplus(0.1 * 50) and a gradient (1 + lambda) times
    plain DPO's at that point."""
    import math

    from jacrl.train.dpo import dpo_loss

    loss, grad = _loss_case(dpo_loss(), -10.0)
    assert loss.item() == pytest.approx(math.log(2)) and grad.item() == pytest.approx(-0.05)
    loss, grad = _loss_case(dpo_loss(rpo_alpha=1.0), -10.0)
    assert loss.item() == pytest.approx(math.log(2) + 2.0)
    assert grad.item() == pytest.approx(-0.05 - 1 / 5)
    loss, grad = _loss_case(dpo_loss(dpop_lambda=50.0), -10.0)
    sig = 1 / (1 + math.exp(-5.0))  # sigma(-beta * z) with z = -50
    assert loss.item() == pytest.approx(math.log1p(math.exp(5.0)), rel=1e-5)
    assert grad.item() == pytest.approx(-0.1 * sig * 51, rel=1e-5)
    # the penalty is one-sided: a chosen answer above the reference's is plain DPO's
    assert _loss_case(dpo_loss(dpop_lambda=50.0), -8.0)[0].item() == pytest.approx(
        _loss_case(dpo_loss(), -8.0)[0].item()
    )
    # ipo's scores are per token already: the NLL term is not divided again
    ipo = _loss_case(dpo_loss(rpo_alpha=1.0), -2.0, loss_type="ipo")[0].item()
    assert ipo - _loss_case(dpo_loss(), -2.0, loss_type="ipo")[0].item() == pytest.approx(2.0)


def test_with_the_terms_the_chosen_answer_does_not_fall(tiny, tasks, parent, tmp_path):
    """Real DPO on jac-tiny, pairs whose sides differ by one character (the gold, and the gold
    with an 'x' in its middle), 6 steps at a high learning rate: plain DPO widens the margin by
    pushing both sides down, the chosen answer's per-token log-probability falls below the
    reference's (likelihood displacement); with RPO's NLL term or DPO-Positive's penalty,
    trained the same way from the same parent, it does not fall."""
    from jacrl.models.registry import resolve
    from jacrl.train.dpo import train_dpo

    rows = []
    for t in tasks:
        gold = fenced(gold_body(t))
        rows.append(
            {
                "prompt": t["prompt"],
                "chosen": gold,
                "rejected": gold[: len(gold) // 2] + "x" + gold[len(gold) // 2 :],
            }
        )
    got = {}
    arms = (
        ("dpo", {"dpop_lambda": 0.0}),
        ("rpo", {"rpo_alpha": 1.0, "dpop_lambda": 0.0}),
        ("dpop", {"dpop_lambda": 50.0}),
    )
    for name, over in arms:
        cfg = DPOConfig(iters=6, learning_rate=1e-3, steps_per_report=1, **over)
        out = tmp_path / name
        out.mkdir()
        got[name] = train_dpo(resolve(tiny), rows, [], cfg, out, parent)
    before = got["dpo"]["logp_before"]
    assert all(s["logp_before"] == before for s in got.values())  # the same start and pairs
    plain = got["dpo"]["logp_after"]
    assert plain["chosen"] < before["chosen"] and plain["rejected"] < before["rejected"]
    for name in ("rpo", "dpop"):
        assert got[name]["logp_after"]["chosen"] >= before["chosen"], name
