"""The KL reference of a GRPO run without a second copy of the model's weights.

The reference is the policy as it starts (base + starting adapter). `frozen_view` builds a second
module tree over the *same* arrays: MLX arrays are immutable, reference-counted values, and the
optimizer replaces the policy's adapter arrays instead of writing into them, so the view keeps the
starting adapter while both trees share the frozen base weights: one set of weight buffers, not
two.
"""

from __future__ import annotations

import copy


def frozen_view(module):
    """A frozen, eval-mode module tree over `module`'s current arrays (shared, not copied). Later
    `module.update(...)` calls (the optimizer's) replace entries in `module`'s tree only."""
    view = _clone_tree(module)
    view.freeze()
    view.eval()
    return view


def _clone_tree(module):
    import mlx.nn as nn

    clone = copy.copy(module)  # a new dict over the same entries; the arrays are shared
    clone._no_grad = set(module._no_grad)  # copy.copy would share the freeze set with the policy

    def clone_value(v):
        if isinstance(v, nn.Module):
            return _clone_tree(v)
        if isinstance(v, (list, tuple)):
            return type(v)(clone_value(x) for x in v)
        if isinstance(v, dict):
            return {k: clone_value(x) for k, x in v.items()}
        return v

    for k, v in module.items():
        clone[k] = clone_value(v)
    return clone


def shared_weight_ids(policy, reference) -> tuple[int, int]:
    """(frozen policy arrays that the reference holds by identity, frozen policy arrays): equal
    when the reference adds no weight buffers of its own."""
    from mlx.utils import tree_flatten

    ref = dict(tree_flatten(reference.parameters()))
    trainable = {k for k, _ in tree_flatten(policy.trainable_parameters())}
    frozen = [(k, v) for k, v in tree_flatten(policy.parameters()) if k not in trainable]
    return sum(ref.get(k) is v for k, v in frozen), len(frozen)
