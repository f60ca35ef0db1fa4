"""The GRPO loss with each prompt run once per group (jacrl.train.grpo_loss) gives mlx-lm-lora's
`grpo_loss`: same loss, gradients and metrics, with and without a KL reference."""

import mlx.core as mx
import mlx.nn as nn
import pytest
from mlx.utils import tree_flatten, tree_map

from jacrl.config import GRPOConfig
from jacrl.models import resolve
from jacrl.train.grpo_loss import shared_prompt_loss, shares_prompt
from jacrl.train.mlx_compat import lora_model
from jacrl.train.reference import frozen_view


@pytest.fixture(scope="module")
def setup(tiny, tmp_path_factory):
    policy, tok, _ = lora_model(
        resolve(tiny),
        GRPOConfig(lora_layers=-1, grad_checkpoint=False),
        tmp_path_factory.mktemp("loss"),
    )
    assert shares_prompt(policy)  # the shared-prompt path, not the fallback, is what is compared
    ref = frozen_view(policy)
    mx.random.seed(1)
    policy.update(
        tree_map(lambda a: a + 0.02 * mx.random.normal(a.shape), policy.trainable_parameters())
    )
    # two prompts of different lengths, groups of 3 with unequal completions (one of 1 token)
    prompts = [
        tok.encode("def add(a: int, b: int) -> int {\n    # TODO\n}"),
        tok.encode("walker Count { has n: int = 0; can go with `root entry { # TODO } }"),
    ]
    texts = [
        "return a + b;\n}",
        "x = 1;",
        "}",
        "visit [-->];",
        "self.n += 1;\n visit [-->];",
        "report self.n;",
    ]
    completions = [mx.array(tok.encode(t)) for t in texts]
    completions[2] = completions[2][:1]
    batch = (prompts, [[1], [1]], ["p0", "p1"], ["a0", "a1"], None)
    return policy, ref, batch, completions


@pytest.mark.parametrize("beta, loss_type", [(0.0, "grpo"), (0.05, "grpo"), (0.05, "dr_grpo")])
def test_shared_prompt_loss_equals_grpo_loss(setup, beta, loss_type):
    from mlx_lm_lora.trainer.grpo_trainer import grpo_loss

    policy, ref, batch, completions = setup
    kw = dict(
        batch=batch,
        completions=completions,
        completion_texts=["t"] * 6,
        batch_indices=[0, 0, 0, 1, 1, 1],
        advantages=mx.array([0.6, -0.2, -0.4, 0.3, 0.3, -0.6]),
        beta=beta,
        epsilon=0.2,
        max_tokens=16,
        grpo_loss_type=loss_type,
    )
    results = {}
    for name, fn in (("theirs", grpo_loss), ("ours", shared_prompt_loss)):
        (loss, tokens, metrics), grads = nn.value_and_grad(policy, fn)(policy, ref, **kw)
        results[name] = loss.item(), tokens.item(), metrics, dict(tree_flatten(grads))
    (l0, n0, m0, g0), (l1, n1, m1, g1) = results["theirs"], results["ours"]
    assert n0 == n1 == sum(c.size for c in completions)
    assert l1 == pytest.approx(l0, rel=1e-4, abs=1e-6) and l0 != 0.0
    for k in ("kl", "average_generated_tokens", "max_generated_tokens", "hit_max_tokens_ratio"):
        assert m1[k].item() == pytest.approx(m0[k].item(), rel=1e-3, abs=1e-6), k
    assert (m0["kl"].item() > 0) == (beta > 0)
    assert set(g0) == set(g1)
    scale = max(mx.abs(v).max().item() for v in g0.values())
    assert scale > 0
    worst = max(mx.abs(g0[k] - g1[k]).max().item() for k in g0)
    assert worst <= 1e-3 * scale, (worst, scale)


def test_checkpointing_is_set_per_training_and_falls_back(tiny, tmp_path):
    """An SFT-style model with checkpointing on turns it on for the class; the next model built
    without it turns it off again (it used to stay on for the process), and a checkpointed model
    takes mlx-lm-lora's loss (the shared prompt's gradient cannot pass a checkpoint)."""
    on, _, _ = lora_model(resolve(tiny), GRPOConfig(lora_layers=1, grad_checkpoint=True), tmp_path)
    assert not shares_prompt(on)
    off, _, _ = lora_model(
        resolve(tiny), GRPOConfig(lora_layers=1, grad_checkpoint=False), tmp_path
    )
    assert shares_prompt(off) and shares_prompt(on)  # one class: off for both now
