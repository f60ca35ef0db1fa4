"""GRPO's update: each rollout's per-token log-probs and the clipped, KL-penalised
policy-gradient objective (DeepSeekMath's GRPO; the KL is the k3 estimator), written here.

A group's G rollouts share one prompt: it runs forward once and its keys and values (one copy
per rollout, so gradients flow back to the one forward) are the cache the completions are scored
against; with prompts of ~400 tokens and completions of ~100 that is most of the update's work
saved. Models that make their own caches, or run under gradient checkpointing (a checkpointed
block returns only its output, so the gradient through the prompt's cache would be lost), run
prompt + completion as one sequence per rollout instead. Loss, gradients and metrics equal
mlx-lm-lora's `grpo_loss` to float tolerance (tests/test_grpo.py: a second implementation).
"""

from __future__ import annotations

LOSS_TYPES = ("grpo", "bnpo", "dr_grpo")
MAX_KL_LOG_RATIO = 20.0  # exp() of a larger reference/policy gap overflows; the share is logged
BUCKET = 32  # completion widths are rounded up to this: fewer distinct shapes to compile


def token_logps(logits, targets, mask):
    """log p(target) per position in float32 (0 where `mask` is False), without materialising
    the whole log-softmax."""
    import mlx.core as mx

    logits = mx.where(mask[..., None], logits, 0).astype(mx.float32)
    logits = logits - mx.stop_gradient(logits.max(axis=-1, keepdims=True))
    picked = mx.take_along_axis(logits, targets[..., None], axis=-1).squeeze(-1)
    return mx.where(mask, picked - mx.log(mx.exp(logits).sum(axis=-1)), 0)


class _Prompt:
    """A layer's cache for the prompt pass: keeps the keys and values it is given. Pure, so a
    second call of the layer changes nothing."""

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


def shares_prompt(model) -> bool:
    """A decoder whose layers take a plain KV cache (no model-made caches: SSM or sliding
    window layers need their own), not under gradient checkpointing."""
    from jacrl.train.mlx_compat import checkpointed

    return not hasattr(model, "make_cache") and hasattr(model, "layers") and not checkpointed(model)


def _padded(completions, width: int):
    import mlx.core as mx

    return mx.stack([mx.pad(c.astype(mx.int32), (0, width - c.size)) for c in completions])


def group_logps(model, prompt: list[int], completions: list):
    """Per-token log-probs of each completion of one prompt: (logps [G, W], mask [G, W]), W the
    longest completion rounded up to `BUCKET`. Right padding is never attended (causal) and is
    masked out."""
    import mlx.core as mx

    g, longest = len(completions), max(1, max(c.size for c in completions))
    width = -(-longest // BUCKET) * BUCKET
    tokens = _padded(completions, width)
    mask = mx.arange(width)[None, :] < mx.array([c.size for c in completions])[:, None]
    head = mx.array(prompt, dtype=mx.int32)[None]
    if not shares_prompt(model):  # prompt + completion as one sequence per rollout
        seqs = mx.concatenate([mx.repeat(head, g, axis=0), tokens[:, :-1]], axis=1)
        logits = model(seqs)[:, len(prompt) - 1 :]
        return token_logps(logits, tokens, mask), mask
    cache = [_Prompt() for _ in model.layers]
    logits = [mx.repeat(model(head, cache=cache)[:, -1:], g, axis=0)]  # -> completion token 1
    cache = [_Prefixed(mx.repeat(c.keys, g, axis=0), mx.repeat(c.values, g, axis=0)) for c in cache]
    logits.append(model(tokens[:, :-1], cache=cache))  # -> tokens 2..W
    return token_logps(mx.concatenate(logits, axis=1), tokens, mask), mask


def objective(logps, ref_logps, mask, advantages, beta, epsilon, max_tokens, loss_type):
    """(loss, tokens scored, metrics) of one batch of rollouts, each used once by the policy that
    drew it: the ratio is exactly 1 but carries the policy gradient, clipped to 1 ± epsilon; the
    KL to the frozen reference (`ref_logps`) is k3 = e^d - d - 1, d = ref - policy, capped at
    `MAX_KL_LOG_RATIO`. loss_type: "grpo" each rollout's mean over its tokens, then the mean
    over rollouts; "bnpo" the mean over all tokens; "dr_grpo" the sum over N x max_tokens."""
    import mlx.core as mx

    if loss_type not in LOSS_TYPES:
        raise ValueError(f"unknown GRPO loss {loss_type!r}; choose from {', '.join(LOSS_TYPES)}")
    logps = mx.where(mask, logps.astype(mx.float32), 0)
    ref_logps = mx.where(mask, mx.stop_gradient(ref_logps.astype(mx.float32)), 0)
    ratio = mx.exp(logps - mx.stop_gradient(logps))
    adv = mx.stop_gradient(advantages.astype(mx.float32))[:, None]
    per_token = -mx.minimum(ratio * adv, mx.clip(ratio, 1 - epsilon, 1 + epsilon) * adv)
    gap = ref_logps - logps
    capped = mx.minimum(gap, MAX_KL_LOG_RATIO)
    kl = mx.maximum(mx.expm1(capped) - capped, 0)
    if beta:
        per_token = per_token + beta * kl
    counts = mask.sum(axis=1)
    total = counts.sum()
    rows = mx.where(mask, per_token, 0).sum(axis=1)
    if loss_type == "grpo":
        loss = (rows / mx.maximum(counts, 1)).mean()
    elif loss_type == "bnpo":
        loss = rows.sum() / mx.maximum(total, 1)
    else:
        loss = rows.sum() / (logps.shape[0] * max_tokens)
    low = (ratio < 1 - epsilon) & (adv < 0) & mask
    high = (ratio > 1 + epsilon) & (adv > 0) & mask
    share = mx.maximum(total, 1)
    metrics = {
        "kl": (mx.where(mask, kl, 0).sum(axis=1) / mx.maximum(counts, 1)).mean(),
        "kl_clip_ratio": ((gap > MAX_KL_LOG_RATIO) & mask).sum() / share,
        "clip_ratio_total": (low | high).sum() / share,
    }
    return loss, total, metrics


def grpo_loss(model, ref_model, prompts, completions, indices, advantages, **kw):
    """`objective` over rollouts: completion i (an int32 array, its end token included) of
    prompt `prompts[indices[i]]` (token ids). Without a reference model the KL is 0. kw: beta,
    epsilon, max_tokens, loss_type (`objective`'s)."""
    import mlx.core as mx

    order: list[int] = []
    parts, ref_parts = [], []
    for u in dict.fromkeys(indices):
        idx = [i for i, x in enumerate(indices) if x == u]
        group = [completions[i] for i in idx]
        parts.append(group_logps(model, prompts[u], group))
        if ref_model is not None and kw.get("beta"):
            ref_parts.append(group_logps(ref_model, prompts[u], group)[0])
        order += idx
    width = max(p[0].shape[1] for p in parts)

    def stack(arrays):
        return mx.concatenate([mx.pad(a, ((0, 0), (0, width - a.shape[1]))) for a in arrays])

    back = mx.array(sorted(range(len(order)), key=order.__getitem__))  # back to rollout order
    logps, mask = stack([p[0] for p in parts])[back], stack([p[1] for p in parts])[back]
    ref = mx.stop_gradient(stack(ref_parts)[back]) if ref_parts else mx.stop_gradient(logps)
    return objective(logps, ref, mask, advantages, **kw)
