"""The GRPO KL reference shares the policy's weights (jacrl.train.reference) and gives the same KL
as the separate copy it replaced."""

import mlx.core as mx
import pytest
from mlx.utils import tree_flatten, tree_map

from jacrl.config import GRPOConfig
from jacrl.models.registry import load, resolve
from jacrl.train.mlx_compat import lora_model
from jacrl.train.reference import frozen_view, shared_weight_ids


@pytest.fixture(scope="module")
def policy_and_view(tiny, tmp_path_factory):
    base = resolve(tiny)
    policy, tok, _ = lora_model(base, GRPOConfig(lora_layers=2), tmp_path_factory.mktemp("ref"))
    start = {k: v for k, v in tree_flatten(policy.trainable_parameters())}
    view = frozen_view(policy)
    # what the optimizer does: new arrays for the adapter, written into the policy's tree only
    mx.random.seed(0)
    policy.update(
        tree_map(lambda a: a + 0.05 * mx.random.normal(a.shape), policy.trainable_parameters())
    )
    return base, policy, tok, view, start


def test_view_holds_the_policys_frozen_arrays_and_the_starting_adapter(policy_and_view):
    base, policy, _, view, start = policy_and_view
    shared, frozen = shared_weight_ids(policy, view)
    assert frozen > 0 and shared == frozen  # no weight buffer of its own
    copy, _ = load(base, fresh=True)
    assert shared_weight_ids(policy, copy)[0] == 0  # the check can fail: a real copy shares none
    mine = dict(tree_flatten(view.parameters()))
    for k, v in start.items():
        assert mine[k] is v  # the starting adapter, not the updated one
    now = dict(tree_flatten(policy.trainable_parameters()))
    assert set(now) == set(start)  # freezing the view froze nothing in the policy
    assert any(not mx.array_equal(now[k], start[k]).item() for k in start)
    assert not tree_flatten(view.trainable_parameters()) and not view.training


def test_shared_reference_gives_the_copys_kl(policy_and_view):
    from mlx_lm_lora.trainer.grpo_trainer import grpo_loss

    base, policy, tok, view, _ = policy_and_view
    copy, _ = load(base, fresh=True)  # base without LoRA = the starting policy (B starts at 0)
    copy.freeze()
    copy.eval()
    prompt = tok.encode("def add(a: int, b: int) -> int {")
    completions = [mx.array(tok.encode(t)) for t in (" return a + b; }", " x = 1;", " }")]
    kw = dict(
        batch=([prompt], [[1]], ["p"], ["a"], None),
        completions=completions,
        completion_texts=["a", "b", "c"],
        batch_indices=[0, 0, 0],
        advantages=mx.array([0.5, -0.25, -0.25]),
        beta=0.1,
        max_tokens=16,
    )
    kl = {
        name: grpo_loss(policy, ref, **kw)[2]["kl"].item()
        for name, ref in (("copy", copy), ("view", view), ("itself", policy))
    }
    assert kl["copy"] > 1e-4 and kl["itself"] == 0.0  # the perturbed adapter moved the policy
    assert kl["view"] == pytest.approx(kl["copy"], rel=1e-5, abs=1e-7)
