"""The reward: extract a completion's body, splice it into the task's template, run it with the
real Jac toolchain in isolation, and score it.

Tiered and monotone (the earlier harness's v3 formula): exact stdout 1.0 > runs with wrong
output [0.40, 0.80] > compiles only [0.20, 0.35] > neither [0, 0.15]; no code 0.0.
No credit without code: a body with nothing left once comments (`#`, `#* *#`), blank lines and
placeholders (`pass`, `...`, empty braces `{}`, `;`) are removed (the prompt's own `# TODO` line,
`pass`, `# ...`) is tier "empty", scores 0.0 and is never run; run, a comment-only body would earn
the "runs" tier, as much as an honest wrong attempt. The check is lexical and string-aware
(`return "# x";` is code): any statement counts.
Body similarity appears in every tier so a GRPO group whose rollouts all fail still has variance.
`formula="additive"` gives the seed README's v2 score, for comparison only.

`jac_behavioral` has mlx-lm-lora's reward signature and is registered in its registry on import:
    --reward-functions-file <path to jacrl/reward.py> --reward-functions jac_behavioral
(this file is then imported by path as `custom_rewards`, so it uses absolute imports only).
"""

from __future__ import annotations

import atexit
import dataclasses
import difflib
import json
import os
from collections.abc import Callable, Mapping
from functools import lru_cache

from jacrl.drivers import Unit
from jacrl.executor import Executor, Verdict
from jacrl.extract import dedent, extract_body, splice
from jacrl.jacsyntax import has_code, idiom_score

FORMULAS = ("tiered", "additive")


@dataclasses.dataclass(frozen=True)
class Hole:
    """What the reward needs to grade one task: parsed from the task record's `answer` JSON."""

    id: str
    template: str
    gold: str
    unit: Unit
    expected_output: str
    timeout: float

    @classmethod
    def from_answer(cls, answer: str) -> Hole:
        return _parse_answer(answer)


@lru_cache(maxsize=4096)
def _parse_answer(answer: str) -> Hole:
    d = json.loads(answer)
    return Hole(id=d["id"], template=d["template"], gold=d["gold"],
                unit=Unit.from_json(d["unit"]), expected_output=d["expected_output"],
                timeout=float(d.get("timeout", 20)))


@dataclasses.dataclass(frozen=True)
class Scored:
    """One graded completion: the score and everything that explains it."""

    task_id: str
    score: float
    tier: str  # exact | runs | compiles | none | empty
    body: str  # the extracted body
    sim: float  # difflib ratio of body vs gold body (both dedented)
    line_match: float  # fraction of expected output lines matched position by position
    verdict: Verdict | None  # None when nothing was run (no code: tier "empty")

    @property
    def exact(self) -> bool:
        return self.tier == "exact"


def exact_match(stdout: str, expected: str) -> bool:
    """The headline metric: stdout equals the expected output, trailing and leading whitespace of
    the whole output stripped (as the reference did)."""
    return stdout.strip() == expected.strip()


def body_similarity(body: str, gold: str) -> float:
    return difflib.SequenceMatcher(None, dedent(body).strip(), dedent(gold).strip()).ratio()


def line_match(stdout: str, expected: str) -> float:
    want = expected.strip().split("\n")
    got = stdout.strip().split("\n")
    return sum(1 for i, w in enumerate(want) if i < len(got) and got[i] == w) / len(want)


def score(body: str, verdict: Verdict | None, hole: Hole, formula: str = "tiered") -> Scored:
    """Grade one extracted body given its run verdict."""
    if formula not in FORMULAS:
        raise ValueError(f"unknown reward formula {formula!r}; choose from {FORMULAS}")
    if verdict is None or not has_code(body):
        return Scored(hole.id, 0.0, "empty", body, 0.0, 0.0, None)
    sim = body_similarity(body, hole.gold)
    ran, compiled = verdict.ran, verdict.compiled or verdict.ran
    exact = ran and exact_match(verdict.stdout, hole.expected_output)
    lines = line_match(verdict.stdout, hole.expected_output) if ran else 0.0
    tier = "exact" if exact else "runs" if ran else "compiles" if compiled else "none"
    if formula == "additive":
        output = 1.0 if exact else (0.5 * difflib.SequenceMatcher(
            None, verdict.stdout.strip(), hole.expected_output.strip()).ratio() if ran else 0.0)
        value = (0.25 * compiled + 0.25 * ran + 0.25 * output
                 + 0.10 * (idiom_score(body) if ran else 0.0) + 0.15 * sim)
    elif exact:
        value = 1.0
    elif ran:
        value = 0.40 + 0.25 * lines + 0.15 * sim
    elif compiled:
        value = 0.20 + 0.15 * sim
    else:
        value = 0.15 * sim
    return Scored(hole.id, round(value, 4) if value != 1.0 else 1.0, tier, body, sim, lines,
                  verdict)


# -- batch scoring ---------------------------------------------------------------------------

_EXECUTOR: Executor | None = None


def default_executor() -> Executor:
    """One fork server per process, started on first use and stopped at exit."""
    global _EXECUTOR
    if _EXECUTOR is None:
        _EXECUTOR = Executor()
        atexit.register(_EXECUTOR.close)
    return _EXECUTOR


def reward_isolation() -> str:
    """The isolation level rewards are computed under (starts the executor). Raises
    SandboxUnavailable, before any training or evaluation work, when there is no sandbox and
    JACRL_ALLOW_UNSANDBOXED is not set."""
    return default_executor().isolation


def _pair(completions: list[str], answer: list[str]) -> list[str]:
    if len(answer) == len(completions):
        return list(answer)
    if len(answer) == 1:
        return list(answer) * len(completions)
    raise ValueError(f"{len(completions)} completions but {len(answer)} answers: expected one "
                     "answer per completion (or a single answer for all)")


def check_formula(formula: str) -> str:
    if formula not in FORMULAS:
        raise ValueError(f"unknown reward formula {formula!r}; choose from {', '.join(FORMULAS)}")
    return formula


def default_formula(env: Mapping[str, str] = os.environ) -> str:
    """JACRL_REWARD_FORMULA, else "tiered". Training configs read it once, when created (the
    formula is then part of the artifact key); training never relies on it at call time."""
    value = env.get("JACRL_REWARD_FORMULA", "").strip() or "tiered"
    if value not in FORMULAS:
        raise ValueError(f"JACRL_REWARD_FORMULA={value!r} is not a reward formula; choose from "
                         f"{', '.join(FORMULAS)}")
    return value


def score_completions(completions: list[str], answers: list[str], *,
                      formula: str | None = None,
                      executor: Executor | None = None) -> list[Scored]:
    """Grade a batch: one run per distinct program (the executor dedups identical ones).
    formula None: `default_formula()`."""
    formula = check_formula(formula or default_formula())
    executor = executor or default_executor()
    holes = [Hole.from_answer(a) for a in _pair(completions, answers)]
    bodies = [extract_body(c, h.unit) for c, h in zip(completions, holes)]
    todo: dict[float, list[int]] = {}
    for i, b in enumerate(bodies):
        if has_code(b):  # no code, no run: tier "empty"
            todo.setdefault(holes[i].timeout, []).append(i)
    verdicts: list[Verdict | None] = [None] * len(completions)
    for timeout, idx in todo.items():
        programs = [splice(holes[i].template, bodies[i]) for i in idx]
        for i, v in zip(idx, executor.run_many(programs, timeout=timeout)):
            verdicts[i] = v
    return [score(b, v, h, formula) for b, v, h in zip(bodies, verdicts, holes)]


def jac_behavioral(prompts: list[str], completions: list[str], answer: list[str],
                   types: list | None = None, formula: str | None = None) -> list[float]:
    """mlx-lm-lora reward function: one float per completion, same order. formula None:
    `default_formula()` at call time (the mlx-lm-lora CLI path); training uses `reward_function`."""
    del prompts, types  # grading needs only the completion and the task's answer record
    return [s.score for s in score_completions(completions, answer, formula=formula)]


def reward_function(formula: str) -> Callable[..., list[float]]:
    """`jac_behavioral` with the formula bound (what jacrl.train hands to mlx-lm-lora), so the
    environment cannot change what a keyed artifact was trained on."""
    check_formula(formula)

    def bound(prompts, completions, answer, types=None):
        return jac_behavioral(prompts, completions, answer, types, formula=formula)

    bound.__name__ = "jac_behavioral"  # mlx-lm-lora names its reward metrics after it
    bound.formula = formula
    return bound


def _register() -> None:
    try:
        from mlx_lm_lora.trainer.grpo_reward_functions import register_reward_function
    except ImportError:  # mlx-lm-lora not installed: the function is still importable
        return
    register_reward_function("jac_behavioral")(jac_behavioral)


_register()
