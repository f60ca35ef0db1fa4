"""No completion can raise out of the reward, and none costs more than a bounded CPU time to grade.

Hypothesis generates completions (derandomized: the same ones on every run, so CI is
deterministic) of the shapes a policy under optimisation can reach: random unicode (lone
surrogates and NUL included), deep nesting of every bracket and quote kind (f-strings too), huge
and truncated fences, the driver echoed back many times, and mixtures, up to 16 KB each
(MAX_BODY; ~4,000 tokens).

- Thousands of them go through the layers before the executor (extraction, the lexical view,
  the not-run check, the splice) for every harness hole: none raises, each takes at most
  CPU_PER_16KB of CPU per 16 KB (time.process_time), and its grade against a real verdict of that
  hole (exact, runs, crashes, does not compile) or without a run is in [0, 1].
- A smaller sample goes through `reward_function` end to end, with the real executor: one float in
  [0, 1] per completion, and a reason wherever nothing was run.
- The known crash, 496 nested `f"{` (`_string_end` <-> `_fstring_expr_end` recursed until
  RecursionError before the lexer kept a stack), through `reward_function` and `jac_behavioral`.
"""

from __future__ import annotations

import json
import time
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jacrl.config import DEFAULT_FORMULA
from jacrl.ruler.extract import extract_body, splice
from jacrl.ruler.reward import (
    MAX_BODY,
    ExtractionWarning,
    Hole,
    jac_behavioral,
    not_run,
    reward_function,
    score,
    score_completions,
)

# The bound, stated: extraction + lexical view + splice of one completion, per 16 KB of it. The
# worst shapes measured 20-25 ms at 16 KB on the 2-core machine under load 6 (a 16 KB run of
# `def f(` took 2.3 s, and 500 nested `f"{` raised, before the fix).
CPU_PER_16KB = 0.050
# Grading a body that ran or failed to compile against its verdict adds difflib's similarity to the
# gold, which is superlinear: up to ~0.6 s measured for an adversarial 16 KB body (a gold body's
# characters spaced out). Asserted here as the bound on the whole grade outside the executor.
SCORE_CPU = 1.5
CAP = MAX_BODY  # the longest completion generated

SETTINGS = dict(
    derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck)
)

OPENERS = [
    "(",
    "[",
    "{",
    "'",
    '"',
    "'''",
    '"""',
    'f"{',
    "f'{",
    'f"""{',
    "f'''{",
    'rf"{',
    'F"{',
    'b"',
    "r'",
    "#*",
    "#",
    "{{",
    'f"{"',
    "f'{f\"{",
    "\\",
    "`",
    "<think>",
    "<answer>",
    "```jac\n",
    "~~~\n",
    "def f(",
    "can x with entry {",
    "obj A {",
]
CLOSERS = [
    ")",
    "]",
    "}",
    "'",
    '"',
    "'''",
    '"""',
    '}"',
    "}'",
    "*#",
    "\n",
    "```\n",
    "</think>",
    "</answer>",
]
TAGS = ["", "jac", "Jac", "python", "text", "`x", "jac {", "```"]
PROSE = [
    "Here is the body:\n",
    "\n\nExplanation: it works.\n",
    "<think>hmm</think>",
    "<answer>",
    "</answer>",
    "\n",
    "Sure! ",
    "# >>>HOLE\n",
    "# <<<HOLE\n",
]


def _cut(text: str, draw) -> str:
    """The text truncated at a drawn point (a generation stopped by max_tokens), at most CAP."""
    if len(text) > CAP or draw(st.booleans()):
        return text[: draw(st.integers(0, min(len(text), CAP)))]
    return text


@st.composite
def unicode_text(draw) -> str:
    """Random unicode, surrogates included, repeated to reach large sizes."""
    piece = draw(st.text(st.characters(exclude_categories=()), max_size=120))
    return piece * draw(st.integers(1, max(1, CAP // max(1, len(piece)))))


@st.composite
def nesting(draw) -> str:
    """One or two openers nested up to thousands deep, maybe partly closed, maybe inside a unit."""
    openers = draw(st.lists(st.sampled_from(OPENERS), min_size=1, max_size=2))
    unit = "".join(openers)
    depth = draw(st.integers(1, CAP // len(unit)))
    text = unit * depth
    if draw(st.booleans()):
        text += draw(st.sampled_from(CLOSERS)) * draw(st.integers(0, depth))
    return draw(st.sampled_from(["", "def f() {\n", "```jac\n", "x = "])) + text


@st.composite
def fences(draw, inner) -> str:
    """Fences of 3 to thousands of backticks or tildes, any tag, closed or not, repeated."""
    parts = []
    for _ in range(draw(st.integers(1, 40))):
        fence = draw(st.sampled_from("`~")) * draw(
            st.one_of(st.integers(3, 6), st.integers(7, 4000))
        )
        indent = " " * draw(st.integers(0, 6))
        body = draw(inner)
        closed = draw(st.booleans())
        parts.append(
            f"{indent}{fence}{draw(st.sampled_from(TAGS))}\n{body}\n"
            + (f"{indent}{fence}\n" if closed else "")
        )
    return "".join(parts)


@st.composite
def completion(draw, driver) -> str:
    """One completion for a hole whose driver file is `driver`."""
    small = st.one_of(st.sampled_from(PROSE), st.text(max_size=40), st.just(driver[:400]))
    kinds = st.one_of(
        unicode_text(),
        nesting(),
        fences(small),
        st.builds(lambda k: driver * k, st.integers(1, 30)),  # the driver echoed
        st.lists(st.sampled_from(PROSE + OPENERS + CLOSERS + [driver]), max_size=60).map("".join),
    )
    parts = draw(st.lists(kinds, min_size=1, max_size=3))
    glue = draw(st.sampled_from(["", "\n", "```\n", "\n```jac\n"]))
    return _cut(glue.join(parts)[: 4 * CAP], draw)


@pytest.fixture(scope="module")
def graded(harness, executor):
    """Each harness hole with its driver text and a real verdict of each kind for it: its gold
    (exact), an empty body (runs, wrong output), a crash, a body that does not compile."""
    bodies = lambda d: [d.gold, "", "x = [1][5];\nreturn 0;", "@@@ not jac {{{"]  # noqa: E731
    cases = [(d, Hole.from_answer(a)) for d, a in harness.values()]
    runs = executor.run_many([splice(h.template, b) for d, h in cases for b in bodies(d)])
    out = []
    for k, (d, h) in enumerate(cases):
        verdicts = runs[4 * k : 4 * k + 4]
        assert [v.status for v in verdicts][::3] == ["ok", "compile_error"], verdicts
        out.append((d.text, h, verdicts))
    return out


def test_generated_completions_extract_in_bounded_time_and_grade_in_0_1(graded):
    over, seen, sizes = [], [], []

    @settings(max_examples=2000, **SETTINGS)
    @given(st.data())
    def check(data):
        driver, hole, verdicts = data.draw(st.sampled_from(graded))
        text = data.draw(completion(driver))
        sizes.append(len(text))
        t0 = time.process_time()
        body = extract_body(text, hole.unit)
        why = not_run(body)
        program = splice(hole.template, body) if not why else None
        cpu = time.process_time() - t0
        if cpu > CPU_PER_16KB * max(1.0, len(text) / 16384):  # noise only adds: measure again
            cpu = min(cpu, _extract_cpu(text, hole))
        if cpu > CPU_PER_16KB * max(1.0, len(text) / 16384):
            over.append((round(cpu, 3), len(text), text[:80]))
        assert isinstance(body, str) and (program is None or isinstance(program, str))
        if why:  # not run: graded 0.0, and it says why
            s = score(body, None, hole)
            assert (s.score, s.reason) == (0.0, why) and s.tier in ("empty", "none"), s
        elif data.draw(st.integers(0, 9)) == 0:  # a tenth: graded against a real run
            v = data.draw(st.sampled_from(verdicts))
            t0 = time.process_time()
            s = score(body, v, hole)
            assert time.process_time() - t0 <= SCORE_CPU, (len(body), body[:80])
            assert 0.0 <= s.score <= 1.0, s
            seen.append(s.tier)
        seen.append(why or "runnable")

    check()
    assert not over, f"{len(over)} over {CPU_PER_16KB * 1e3:.0f} ms per 16 KB: {over[:5]}"
    # the generator reaches every outcome: not run for each reason, and graded in each tier
    assert {"no code", "runnable", "exact", "runs", "compiles", "none"} <= set(seen), set(seen)
    big = sum(n >= CAP // 2 for n in sizes)  # the bound is about large completions: many are
    assert len(sizes) >= 2000 and big >= 100 and max(sizes) >= 0.95 * CAP, (len(sizes), big)


def _extract_cpu(text: str, hole: Hole) -> float:
    best = float("inf")
    for _ in range(2):
        t0 = time.process_time()
        body = extract_body(text, hole.unit)
        if not not_run(body):
            splice(hole.template, body)
        best = min(best, time.process_time() - t0)
    return best


def test_generated_completions_through_reward_function(harness, executor):
    """A sample end to end: the real reward, the real executor, one batch per example."""
    answers = [a for _, a in harness.values()]
    drivers = [d.text for d, _ in harness.values()]
    fn = reward_function(DEFAULT_FORMULA)

    @settings(max_examples=4, **SETTINGS)
    @given(st.data())
    def check(data):
        picks = [data.draw(st.integers(0, len(answers) - 1)) for _ in range(12)]
        texts = [data.draw(completion(drivers[i])) for i in picks]
        with warnings.catch_warnings():
            warnings.simplefilter("error", ExtractionWarning)  # the guard must not be what holds
            scores = fn(None, texts, [answers[i] for i in picks])
        assert len(scores) == len(texts)
        assert all(isinstance(x, float) and 0.0 <= x <= 1.0 for x in scores), scores
        for s in fn.last:
            assert s.verdict is not None or s.reason, s

    check()


@pytest.mark.parametrize("depth", [496, 5000])
def test_nested_fstrings_do_not_crash_the_reward(harness, depth):
    """496 nested `f"{` (1,488 characters) overflowed Python's stack in the lexer on ccf6cdf, and
    `reward_function` / `jac_behavioral` raised RecursionError; 5,000 (15 KB, under MAX_BODY) with
    any stack. Now the body is extracted whole and run: jaclang rejects it (tier "none")."""
    answer = next(a for _, a in harness.values())
    text = 'f"{' * depth
    with warnings.catch_warnings():
        warnings.simplefilter("error", ExtractionWarning)
        fn = reward_function(DEFAULT_FORMULA)
        [value] = fn(None, [text], [answer])
        [plain] = jac_behavioral(None, [text], [answer])
    [s] = fn.last
    assert s.body == text and s.verdict is not None, s
    assert s.tier == "none" and s.verdict.status == "compile_error", s.verdict
    assert 0.0 <= value == plain < 0.1


def test_extraction_failure_costs_one_completion_and_says_why(harness, executor, monkeypatch):
    """The last resort: should extraction raise (a bug), that completion alone is tier "none",
    never run, its reason names the exception, an ExtractionWarning says so, the batch goes on."""
    import jacrl.ruler.reward as reward

    real = reward.extract_body

    def flaky(text, unit):
        if text == "boom":
            raise RecursionError("maximum recursion depth exceeded")
        return real(text, unit)

    monkeypatch.setattr(reward, "extract_body", flaky)
    ((d, answer),) = list(harness.values())[:1]
    with pytest.warns(ExtractionWarning, match="RecursionError"):
        s = score_completions(["boom", f"```jac\n{d.gold}\n```"], [answer], executor=executor)
    assert (s[0].tier, s[0].score, s[0].verdict) == ("none", 0.0, None)
    assert s[0].reason.startswith("extraction failed: RecursionError: maximum recursion"), s[0]
    assert s[1].score == 1.0, s[1]
    assert json.loads(answer)["id"] == s[0].task_id


def test_a_body_over_max_body_is_not_run_and_says_why(harness, executor):
    ((_, answer),) = list(harness.values())[:1]
    [s] = score_completions(["x = 1;\n" * (MAX_BODY // 7 + 1)], [answer], executor=executor)
    assert (s.tier, s.score, s.verdict) == ("none", 0.0, None), s
    assert s.reason == f"body of {len(s.body):,} characters, over MAX_BODY (16,384): not run"
