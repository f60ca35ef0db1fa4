"""Per-task token budgets from the gold answer: a model that loops or drifts (a base model does on
almost every task) spends a sample's whole `max_tokens`, so an evaluation costs what the cap
allows, not what the answers need. With `EvalConfig.budget_factor` f > 0 a task's budget is
ceil(f × its gold answer's tokens) + MARGIN, at most `max_tokens` — as the executor's CPU
time-outs come from the gold's own run time (`jacrl.executor.budget`). The gold answer is the
assistant turn SFT trains on (the fenced gold body) plus its end token, as `jacrl models check`
counts it; the rows keep every task's budget and the truncation it caused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from jacrl.tasks.record import fenced, gold_body

MARGIN = 16  # tokens over f × gold: a short preamble ("Here is the code:") or a longer name


def gold_tokens(tokenizer, task: dict) -> int:
    """Tokens of the task's gold answer turn (fenced body) plus one end token."""
    return len(tokenizer.encode(fenced(gold_body(task)), add_special_tokens=False)) + 1


def budgets(tokenizer, tasks: Sequence[dict], factor: float, cap: int) -> list[int]:
    """Each task's completion budget: `cap` for all when factor is 0, else
    min(cap, ceil(factor × gold tokens) + MARGIN)."""
    if factor < 0:
        raise ValueError(f"budget_factor must be >= 0, not {factor}")
    if not factor:
        return [cap] * len(tasks)
    return [min(cap, math.ceil(factor * gold_tokens(tokenizer, t)) + MARGIN) for t in tasks]
