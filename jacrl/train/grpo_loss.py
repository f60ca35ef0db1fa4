"""mlx-lm-lora's GRPO loss with each prompt run once per group, not once per rollout.

mlx-lm-lora scores every rollout as its own prompt + completion sequence: a group of G rollouts
runs its shared prompt G times forward and backward, in the policy and again in the reference.
With prompts of ~400 tokens and completions of ~100 that is ~80 % of the update's work, repeated.
Here a group's prompt runs once; its keys and values (one copy per rollout, so gradients flow back
to the one forward) are the cache the G completions are scored against. The objective is
mlx-lm-lora's own (`_grpo_objective`), so loss, gradients and metrics equal `grpo_loss`'s to float
tolerance (tests/test_grpo.py); models that make their own caches, or run under gradient
checkpointing, fall back to it.
"""

from __future__ import annotations

import contextlib


class _Prompt:
    """A layer's cache for the prompt pass: keeps the keys and values it is given. Pure, so the
    recompute of gradient checkpointing (which calls the layer again) changes nothing."""

    offset = 0

    def update_and_fetch(self, keys, values):
        self.keys, self.values = keys, values
        return keys, values


class _Prefixed:
    """A layer's cache for the completions: the prompt's keys and values (one copy per rollout)
    before the new ones; pure too. RoPE positions start at the prompt's length."""

    def __init__(self, keys, values):
        self.keys, self.values, self.offset = keys, values, keys.shape[2]

    def update_and_fetch(self, keys, values):
        import mlx.core as mx

        return (
            mx.concatenate([self.keys, keys], axis=2),
            mx.concatenate([self.values, values], axis=2),
        )


def _group_logps(model, prompt: list[int], completions: list):
    """Per-token log-probs of each completion of one prompt, the prompt run once: (logps [G, W],
    mask [G, W]) with W the longest completion, rounded up to a bucket."""
    import mlx.core as mx
    from mlx_lm_lora.trainer.grpo_trainer import _select_token_logps, bucket_sequence_length

    g = len(completions)
    lengths = mx.array([c.size for c in completions])
    # widths in mlx-lm-lora's buckets: its compiled log-prob kernel is rebuilt for each new shape
    width = bucket_sequence_length(max(1, max(c.size for c in completions)))
    tokens = mx.stack([mx.pad(c.astype(mx.int32), (0, width - c.size)) for c in completions])
    cache = [_Prompt() for _ in model.layers]
    first = model(mx.array(prompt, dtype=mx.int32)[None], cache=cache)[:, -1:]  # -> token 1
    logits = [mx.repeat(first, g, axis=0)]
    if width > 1:  # right padding is never attended (causal) and is masked out of the loss
        cache = [
            _Prefixed(mx.repeat(c.keys, g, axis=0), mx.repeat(c.values, g, axis=0)) for c in cache
        ]
        logits.append(model(tokens[:, :-1], cache=cache))  # -> tokens 2..W
    mask = mx.arange(width)[None, :] < lengths[:, None]
    return _select_token_logps(mx.concatenate(logits, axis=1), tokens, mask), mask


def shares_prompt(model) -> bool:
    """A decoder whose layers take a plain KV cache (no model-made caches: SSM or sliding
    window layers need their own), not under gradient checkpointing (a checkpointed layer
    returns only its output: the gradient through the prompt's keys and values would be lost)."""
    from jacrl.train.mlx_compat import checkpointed

    return not hasattr(model, "make_cache") and hasattr(model, "layers") and not checkpointed(model)


def _batch_logps(model, prompts, completions, indices):
    """(logps [N, W], mask [N, W]) in the rollouts' order, one prompt forward per group."""
    import mlx.core as mx

    rows: dict[int, tuple] = {}
    for u in dict.fromkeys(indices):
        idx = [i for i, x in enumerate(indices) if x == u]
        got = _group_logps(model, prompts[u], [completions[i] for i in idx])
        for k, i in enumerate(idx):
            rows[i] = (got[0][k], got[1][k])
    width = max(r[0].shape[0] for r in rows.values())
    pad = [
        (mx.pad(lp, (0, width - lp.shape[0])), mx.pad(m, (0, width - m.shape[0])))
        for lp, m in (rows[i] for i in range(len(indices)))
    ]
    return mx.stack([a for a, _ in pad]), mx.stack([b for _, b in pad])


def shared_prompt_loss(
    model,
    ref_model,
    batch,
    completions=None,
    completion_texts=None,
    batch_indices=None,
    advantages=None,
    reward_metrics=None,
    beta=0.1,
    epsilon=1e-4,
    epsilon_high=None,
    max_tokens=64,
    importance_sampling_level="token",
    grpo_loss_type="grpo",
):
    """`mlx_lm_lora...grpo_loss`'s signature and result, each prompt run once per group."""
    import mlx.core as mx
    from mlx_lm_lora.trainer import grpo_trainer as gt

    if not shares_prompt(model):  # mlx-lm-lora's own loss
        return _ORIGINAL.get("grpo_loss", gt.grpo_loss)(
            model,
            ref_model,
            batch,
            completions,
            completion_texts,
            batch_indices,
            advantages,
            reward_metrics,
            beta,
            epsilon,
            epsilon_high,
            max_tokens,
            importance_sampling_level,
            grpo_loss_type,
        )
    logps, mask = _batch_logps(model, batch[0], completions, batch_indices)
    ref_logps = mx.stop_gradient(logps)
    if beta != 0 and ref_model is not None:
        ref_logps = mx.stop_gradient(
            _batch_logps(ref_model, batch[0], completions, batch_indices)[0]
        )
    loss, tokens, metrics = gt._grpo_objective(
        logps,
        ref_logps,
        mask,
        advantages,
        beta,
        epsilon,
        epsilon if epsilon_high is None else epsilon_high,
        max_tokens,
        importance_sampling_level,
        grpo_loss_type,
    )
    lengths = mx.array([c.size for c in completions])
    metrics.update(
        average_generated_tokens=lengths.astype(mx.float32).mean(),
        max_generated_tokens=lengths.max(),
        min_generated_tokens=lengths.min(),
        hit_max_tokens_ratio=(lengths >= max_tokens).astype(mx.float32).mean(),
    )
    metrics.update(reward_metrics or {})
    return loss, tokens, metrics


_ORIGINAL: dict = {}


@contextlib.contextmanager
def shared_prompt_groups(group_size: int):
    """The trainer's loss is `shared_prompt_loss` meanwhile, and its microbatches are whole groups
    (it splits a step into chunks of batch_size rollouts when its loss is `grpo_loss`: chunks of
    group_size keep each prompt's rollouts together). Pass `shared_prompt_loss` as loss_fn."""
    from mlx_lm_lora.trainer import grpo_trainer as gt

    _ORIGINAL.setdefault("grpo_loss", gt.grpo_loss)
    orig = gt.grpo_loss, gt._grpo_value_and_grad

    def per_group(loss_value_and_grad, model, chunk_size, **kw):
        return orig[1](loss_value_and_grad, model, group_size, **kw)

    gt.grpo_loss, gt._grpo_value_and_grad = shared_prompt_loss, per_group
    try:
        yield
    finally:
        gt.grpo_loss, gt._grpo_value_and_grad = orig
