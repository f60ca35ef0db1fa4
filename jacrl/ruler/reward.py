"""The reward: extract a completion's body, splice it into the task's template, run it with the
real Jac toolchain in isolation, and score it.

Formulas are a small registry (`FORMULAS`: name -> function of the `Evidence` of one graded body;
adding one is one decorated function). The default, `dependent`, pays for what the hole changes:
    exact stdout 1.0; compiled (whatever its exit) 0.25·sim + 0.55·changed; neither 0.10·sim;
    no code 0.0
where `changed` is the share of the expected output lines that depend on the hole (those that
differ from the output of the template run with an empty body, measured at build time and stored
as the task's `baseline_output`) matched position by position, and `sim` the body's similarity to
the gold body. It is scored from what the job printed and what the server saw from outside
(compiled, before any of the program's code ran; timed out), never from how it exited: "ran" is
claimed by the job's own process (its completion token is a secret in that process, which a
program that walks its frames can forge), so a forged "ran" scores exactly what the same body
scores without it. Exiting 0 earns nothing by itself: a constant body (`return [];`, `exit(0)`)
scores ~0.01-0.05, below an honest attempt that crashes (its similarity is high), and for one body
the score never falls as it gets further (runs = compiles >= neither). `tiered` is the earlier
harness's v3 formula (runs [0.40, 0.80] whatever the output, compiles [0.20, 0.35], neither
[0, 0.15]) and `additive` the seed README's v2, both for comparison.
No credit without code: a body with nothing left once comments (`#`, `#* *#`), blank lines and
placeholders (`pass`, `...`, empty braces `{}`, `;`) are removed (the prompt's own `# TODO` line,
`pass`, `# ...`) is tier "empty", scores 0.0 and is never run. The check is lexical and
string-aware (`return "# x";` is code): any statement counts. A body longer than MAX_BODY is tier
"none" with score 0.0 and is never run (a 300 KB body took 14 s to compile).
No completion raises out of the reward: extraction is linear-time with no recursion, so any string
yields a body (tests/test_reward_never_raises.py); a body nested too deep for jaclang is its
`compile_error` (tier "none"). Should extraction still fail, that completion alone is tier "none",
score 0.0, never run, with the exception in its `reason` and an `ExtractionWarning`, and the
batch goes on. Only an executor fault (`ExecutorError`: the machinery, not a score) raises.
Body similarity appears in every tier so a GRPO group whose rollouts all fail still has variance.

`jac_behavioral` has mlx-lm-lora's reward signature and is registered in its registry on import:
    --reward-functions-file <path to jacrl/ruler/reward.py> --reward-functions jac_behavioral
(this file is then imported by path as `custom_rewards`, so it uses absolute imports only).
"""

from __future__ import annotations

import atexit
import dataclasses
import difflib
import json
import warnings
from collections.abc import Callable
from functools import lru_cache

from jacrl.callers import outside
from jacrl.config import DEFAULT_FORMULA, REWARD_FORMULAS, check_formula
from jacrl.executor import Executor, Verdict
from jacrl.ruler.drivers import Unit
from jacrl.ruler.extract import dedent, extract_body, splice
from jacrl.ruler.jacsyntax import has_code, idiom_score

MAX_BODY = 16_384  # characters; the longest gold body is under 1,000, a 512-token answer ~3,000


@dataclasses.dataclass(frozen=True)
class Hole:
    """What the reward needs to grade one task: parsed from the task record's `answer` JSON."""

    id: str
    template: str
    gold: str
    unit: Unit
    expected_output: str
    timeout: float
    baseline_output: str | None  # stdout of the template with an empty body (None: not measured)

    @classmethod
    def from_answer(cls, answer: str) -> Hole:
        return _parse_answer(answer)


@lru_cache(maxsize=4096)
def _parse_answer(answer: str) -> Hole:
    d = json.loads(answer)
    return Hole(
        id=d["id"],
        template=d["template"],
        gold=d["gold"],
        unit=Unit.from_json(d["unit"]),
        expected_output=d["expected_output"],
        timeout=float(d.get("timeout", 20)),
        baseline_output=d.get("baseline_output"),
    )


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
    reason: str = ""  # why nothing was run, when nothing was ("" when the verdict says it)

    @property
    def exact(self) -> bool:
        return self.tier == "exact"


def exact_match(stdout: str, expected: str) -> bool:
    """The headline metric: stdout equals the expected output, trailing and leading whitespace of
    the whole output stripped (as the reference did)."""
    return stdout.strip() == expected.strip()


def clean_exit(verdict: Verdict | None) -> bool:
    """It compiled, was not timed out, exited 0 (the kernel's wait status, as the server saw it)
    and wrote nothing to stderr (where jaclang and Python report an error; no gold writes there).
    What `jac run` shows a user, decided outside the job: never the job's own "ran" (its token,
    which a program can forge). A program can still choose its exit and silence its stderr, so
    only `exact` certifies a body; tools that only need "it runs" (run rates, a bare prompt's
    best-of-k) use this."""
    return (
        verdict is not None
        and verdict.compiled
        and not verdict.timed_out
        and verdict.exit_code == 0
        and not verdict.stderr
    )


def body_similarity(body: str, gold: str) -> float:
    return difflib.SequenceMatcher(None, dedent(body).strip(), dedent(gold).strip()).ratio()


def line_match(stdout: str, expected: str) -> float:
    want = expected.strip().split("\n")
    got = stdout.strip().split("\n")
    return sum(1 for i, w in enumerate(want) if i < len(got) and got[i] == w) / len(want)


def changed_lines(stdout: str, expected: str, baseline: str | None) -> float:
    """Share of the expected lines that depend on the hole (differ from the baseline's line at
    the same position) that stdout matches at that position; 0.0 when none depends on it. Without
    a baseline every line counts as dependent."""
    want = expected.strip().split("\n")
    base = baseline.strip().split("\n") if baseline else []
    got = stdout.strip().split("\n")
    dependent = [i for i, w in enumerate(want) if i >= len(base) or base[i] != w]
    if not dependent:
        return 0.0
    return sum(1 for i in dependent if i < len(got) and got[i] == want[i]) / len(dependent)


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What a formula may use of one graded body (it ran, or at least compiled, or neither)."""

    exact: bool
    ran: bool
    compiled: bool
    sim: float  # body vs gold body
    lines: float  # share of expected lines matched by position
    changed: float  # share of the hole-dependent expected lines matched (`changed_lines`)
    stdout: str
    expected: str
    body: str


FORMULAS: dict[str, Callable[[Evidence], float]] = {}


def formula(name: str):
    """Register a reward formula under `name` (a function of `Evidence` returning [0, 1])."""

    def register(fn: Callable[[Evidence], float]) -> Callable[[Evidence], float]:
        FORMULAS[name] = fn
        return fn

    return register


@formula("dependent")
def _dependent(e: Evidence) -> float:
    if e.exact:
        return 1.0
    if e.compiled:  # never e.ran: see the module doc
        return 0.25 * e.sim + 0.55 * e.changed
    return 0.10 * e.sim


@formula("tiered")
def _tiered(e: Evidence) -> float:
    if e.exact:
        return 1.0
    if e.ran:
        return 0.40 + 0.25 * e.lines + 0.15 * e.sim
    return (0.20 if e.compiled else 0.0) + 0.15 * e.sim


@formula("additive")
def _additive(e: Evidence) -> float:
    output = (
        1.0
        if e.exact
        else (
            0.5 * difflib.SequenceMatcher(None, e.stdout.strip(), e.expected.strip()).ratio()
            if e.ran
            else 0.0
        )
    )
    return (
        0.25 * e.compiled
        + 0.25 * e.ran
        + 0.25 * output
        + 0.10 * (idiom_score(e.body) if e.ran else 0.0)
        + 0.15 * e.sim
    )


if tuple(FORMULAS) != REWARD_FORMULAS:  # the knob's choices (jacrl.config) are what is here
    raise ImportError(
        f"reward formulas {tuple(FORMULAS)} != config.REWARD_FORMULAS {REWARD_FORMULAS}"
    )


class ExtractionWarning(RuntimeWarning):
    """Extracting a completion's body raised: a bug in jacrl.ruler.extract, graded tier "none"."""


def not_run(body: str) -> str:
    """Why a body is not run ("" when it is): it has no code, or it is over MAX_BODY."""
    if not has_code(body):
        return "no code"
    if len(body) > MAX_BODY:
        return f"body of {len(body):,} characters, over MAX_BODY ({MAX_BODY:,}): not run"
    return ""


def score(
    body: str, verdict: Verdict | None, hole: Hole, formula: str = DEFAULT_FORMULA, failed: str = ""
) -> Scored:
    """Grade one extracted body given its run verdict (None: nothing was run). `failed`: why
    there is no body to grade (extraction raised): tier "none" whatever the body."""
    grade = FORMULAS[check_formula(formula)]
    if failed:
        return Scored(hole.id, 0.0, "none", body, 0.0, 0.0, None, failed)
    if not has_code(body):
        return Scored(hole.id, 0.0, "empty", body, 0.0, 0.0, None, "no code")
    if verdict is None:  # code, but too long to run (MAX_BODY)
        return Scored(hole.id, 0.0, "none", body, 0.0, 0.0, None, not_run(body))
    sim = body_similarity(body, hole.gold)
    ran, compiled = verdict.ran, verdict.compiled or verdict.ran
    # what it printed counts whatever its exit path ("ran" is the job's own claim); a time-out
    # (the server's observation) is never exact
    printed = compiled and not verdict.timed_out
    exact = printed and exact_match(verdict.stdout, hole.expected_output)
    lines = line_match(verdict.stdout, hole.expected_output) if printed else 0.0
    changed = (
        changed_lines(verdict.stdout, hole.expected_output, hole.baseline_output)
        if printed
        else 0.0
    )
    tier = "exact" if exact else "runs" if ran else "compiles" if compiled else "none"
    value = grade(
        Evidence(
            exact, ran, compiled, sim, lines, changed, verdict.stdout, hole.expected_output, body
        )
    )
    return Scored(
        hole.id, round(value, 4) if value != 1.0 else 1.0, tier, body, sim, lines, verdict
    )


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
    raise ValueError(
        f"{len(completions)} completions but {len(answer)} answers: expected one "
        "answer per completion (or a single answer for all)"
    )


def score_completions(
    completions: list[str],
    answers: list[str],
    *,
    formula: str = DEFAULT_FORMULA,
    executor: Executor | None = None,
) -> list[Scored]:
    """Grade a batch with `formula`: one run per distinct program (the executor dedups identical
    ones)."""
    formula = check_formula(formula)
    executor = executor or default_executor()
    holes = [Hole.from_answer(a) for a in _pair(completions, answers)]
    extracted = [_extract(c, h) for c, h in zip(completions, holes, strict=True)]
    bodies, failed = [b for b, _ in extracted], [why for _, why in extracted]
    # no code (tier "empty"), too long or extraction failed: no run
    idx = [i for i, b in enumerate(bodies) if not failed[i] and not not_run(b)]
    verdicts: list[Verdict | None] = [None] * len(completions)
    ran = executor.run_many(
        [splice(holes[i].template, bodies[i]) for i in idx], timeout=[holes[i].timeout for i in idx]
    )  # each task's own
    for i, v in zip(idx, ran, strict=True):
        verdicts[i] = v
    return [
        score(b, v, h, formula, why)
        for b, v, h, why in zip(bodies, verdicts, holes, failed, strict=True)
    ]


def _extract(completion: str, hole: Hole) -> tuple[str, str]:
    """(body, "") or, when extraction raises, ("", the reason): a last resort that keeps one
    completion from ending a training step, and says so (tier "none", the `ExtractionWarning`)."""
    try:
        return extract_body(completion, hole.unit), ""
    except Exception as e:  # any bug here must cost one completion, not the batch
        why = f"extraction failed: {type(e).__name__}: {str(e)[:200]}: not run"
        warnings.warn(
            f"{hole.id}: {why} (a {len(completion):,}-character completion)",
            ExtractionWarning,
            stacklevel=outside(__file__),  # the line that asked for the scores, not one in here
        )
        return "", why


def jac_behavioral(
    prompts: list[str],
    completions: list[str],
    answer: list[str],
    types: list | None = None,
    formula: str = DEFAULT_FORMULA,
) -> list[float]:
    """mlx-lm-lora reward function: one float per completion, same order (the mlx-lm-lora CLI
    path grades with DEFAULT_FORMULA); with a formula bound: `reward_function`."""
    del prompts, types  # grading needs only the completion and the task's answer record
    return [s.score for s in score_completions(completions, answer, formula=formula)]


def reward_function(formula: str) -> Callable[..., list[float]]:
    """`jac_behavioral` with the formula bound, for mlx-lm-lora's own GRPO trainer (jacrl's
    GRPO calls `score_completions` itself), so the environment cannot change what it trains on."""
    check_formula(formula)

    def bound(prompts, completions, answer, types=None):
        del prompts, types
        bound.last = score_completions(completions, answer, formula=formula)
        return [s.score for s in bound.last]

    bound.__name__ = "jac_behavioral"  # mlx-lm-lora names its reward metrics after it
    bound.formula = formula
    bound.last = []  # the Scored of the latest call: what the rollout log records
    return bound


def _register() -> None:
    try:
        from mlx_lm_lora.trainer.grpo_reward_functions import register_reward_function
    except ImportError:  # mlx-lm-lora not installed: the function is still importable
        return
    register_reward_function("jac_behavioral")(jac_behavioral)


_register()
