"""The reward on real jaclang runs: every answer shape built from a gold body scores exactly 1.0;
empty, garbage and wrong bodies land below 1.0 in the right tier; fork-server verdicts equal the
plain `jac run` subprocess backend's; the changed-lines share, why a body is not run, a
time-out's lines, each task's own time-out and a failed extraction's record and warning; exact
match (whitespace inside a line counts), the default formula's value by hand, `line_match`, what
nothing run scores, one answer per completion, a body of exactly MAX_BODY characters, and the
formula asked for being the one used."""

from __future__ import annotations

import dataclasses
import json
import sys

import pytest
from variants import variants

from jacrl.executor import Verdict, run_subprocess
from jacrl.ruler import reward
from jacrl.ruler.drivers import Unit
from jacrl.ruler.extract import extract_body, splice
from jacrl.ruler.jacsyntax import idiom_score
from jacrl.ruler.reward import (
    ExtractionWarning,
    Hole,
    changed_lines,
    exact_match,
    jac_behavioral,
    not_run,
    score,
    score_completions,
)
from jacrl.ruler.variants import formatted_shapes

# A body that compiles and runs but prints the wrong thing, per harness driver.
WRONG = {
    "syn_harness_collatz_steps": "return n + 1;",
    "osp_harness_tally_walker": "self.names.append(here.name);\nvisit [-->];",
    "osp_harness_node_greet": "self.visits += 2;\nvisit [-->];",
    "arch_harness_account_deposit": "self.balance += amount;\nreturn True;",
    "lib_harness_clamp_partial": "result.append(s);",
    "text_harness_json_braces": 'return "{}";',
    "err_harness_match_kind": 'return "zero";',
}
GARBAGE = "```jac\n@@@ not jac !!! {{{\n```"
CRASHES = "x = [1][5];\nreturn 0;"  # compiles, then fails at run time


def _not_one(harness, executor, shapes) -> tuple[list, int]:
    """(name, score, tier) of every answer shape of every harness driver scoring below 1.0, and
    how many were scored."""
    named = [
        (f"{tid}/{name}", completion, answer)
        for tid, (d, answer) in harness.items()
        for name, completion in shapes(d).items()
    ]
    scored = score_completions(
        [c for _, c, _ in named], [a for _, _, a in named], executor=executor
    )
    return [
        (n, s.score, s.tier) for (n, _, _), s in zip(named, scored, strict=True) if s.score != 1.0
    ], len(scored)


def test_every_answer_shape_of_the_gold_scores_one(harness, executor):
    bad, n = _not_one(harness, executor, variants)
    assert not bad and n >= 7 * 11


def test_every_formatting_variant_of_every_shape_scores_one(harness, executor):
    bad, n = _not_one(harness, executor, formatted_shapes)  # CRLF, BOM, ~~~, NBSP, ...
    assert not bad and n >= 7 * 11 * 8


def test_surrogates_and_nul_never_raise(harness, executor):
    for tid, (d, answer) in harness.items():
        fenced = f"```jac\n{d.gold}\n```"
        exact = [
            f"\ud800 Here:\n{fenced}\n\udfff",
            fenced.replace("\n", "\n\x00"),
            "\x00" + fenced,
            f"<think>\ud83d\ude00 \ud800</think>{fenced}",
        ]
        broken = [
            f"```jac\n{d.gold}\nx\ud800 = 1;\n```",
            f"```jac\n\x00\udc00{d.gold}",
            "\ud800",
            "\x00",
            "\x00\ud800\x00",
        ]
        scored = score_completions(exact + broken, [answer], executor=executor)
        for c, s in zip(exact + broken, scored, strict=True):
            s.body.encode("utf-8")  # what was keyed and spliced is plain text
            assert (s.score == 1.0) if c in exact else (0.0 <= s.score < 1.0), (tid, ascii(c), s)
        assert scored[-2].tier == "empty"  # a lone NUL is no code
    d, answer = harness["syn_harness_collatz_steps"]
    assert jac_behavioral(["p"], [f"\ud800\n```jac\n{d.gold}\n```\x00"], [answer]) == [1.0]


@pytest.mark.parametrize(
    "formula, runs, compiles, neither",
    [
        (
            "dependent",
            (0.0, 0.80),
            (0.0, 0.20),
            0.10,
        ),  # the default: pays for what the hole changes
        ("tiered", (0.40, 0.80), (0.20, 0.35), 0.15),  # the reference's v3 ranges
    ],
)
def test_failures_land_in_their_tiers(harness, executor, formula, runs, compiles, neither):
    for tid, (_, answer) in harness.items():
        wrong, garbage, empty, crash = score_completions(
            [f"```jac\n{WRONG[tid]}\n```", GARBAGE, "", f"```jac\n{CRASHES}\n```"],
            [answer],
            formula=formula,
            executor=executor,
        )
        assert wrong.tier == "runs" and runs[0] <= wrong.score <= runs[1], (tid, wrong)
        assert garbage.tier == "none" and garbage.score <= neither, (tid, garbage)
        assert empty.tier == "empty" and empty.score == 0.0 and empty.verdict is None
        assert crash.tier in ("compiles", "runs") and crash.score < 1.0, (tid, crash)
        if crash.tier == "compiles":
            assert compiles[0] <= crash.score <= compiles[1]


def test_changed_lines_pay_only_for_what_the_hole_changes():
    from jacrl.ruler.reward import changed_lines

    expected, baseline = "head\n5\ntail\n9", "head\n0\ntail\n0"
    assert changed_lines("head\n0\ntail\n0", expected, baseline) == 0.0  # the empty body's output
    assert changed_lines("head\n5\ntail\n0", expected, baseline) == 0.5
    assert changed_lines("x\n5\ny\n9", expected, baseline) == 1.0  # only dependent lines count
    assert changed_lines("head", expected, "") == 0.25  # no baseline printed: every line depends
    assert changed_lines("head\n5", expected, None) == 0.5  # unmeasured: every line depends
    assert changed_lines("a", "a", "a") == 0.0  # nothing depends on the hole


def test_tiers_are_monotone_and_sim_gives_variance(harness, executor):
    d, answer = harness["syn_harness_collatz_steps"]
    hole = Hole.from_answer(answer)
    scored = score_completions(
        [d.gold, "return n + 1;", "return steps;", "```jac\nsteps = 0;\nwhile n > 1 {\n```"],
        [answer],
        formula="tiered",
        executor=executor,
    )
    assert [s.tier for s in scored] == ["exact", "runs", "compiles", "none"]
    values = [s.score for s in scored]
    assert values == sorted(values, reverse=True)  # the reference: monotone across bodies
    # the default: for one body, getting further never scores less (runs >= compiles >= neither)
    import dataclasses

    ran = scored[1].verdict
    tiers = [
        ran,
        dataclasses.replace(ran, ran=False, status="runtime_error"),
        dataclasses.replace(ran, ran=False, compiled=False, status="compile_error"),
    ]
    for body in ("return n + 1;", "return steps;", d.gold[:40]):
        got = [score(body, v, hole) for v in tiers]
        assert [g.tier for g in got] == ["runs", "compiles", "none"]
        assert got[0].score >= got[1].score >= got[2].score > 0.0, got
    # two different failing bodies get different rewards (no σ = 0 group)
    a, b = score_completions(
        ["```jac\nwhile {\n```", "```jac\nsteps = 0; while n > 1 {\n```"],
        [answer],
        executor=executor,
    )
    assert a.tier == b.tier == "none" and a.score != b.score
    assert score(d.gold, scored[0].verdict, hole).sim == 1.0


def test_additive_formula_for_comparison(harness, executor):
    d, answer = harness["osp_harness_tally_walker"]
    gold, wrong = score_completions(
        [d.gold, WRONG[d.id]], [answer], formula="additive", executor=executor
    )
    assert gold.score > wrong.score
    # compiles + runs + exact output + idiom (gated on runs) + body similarity 1.0
    assert gold.score == pytest.approx(0.25 + 0.25 + 0.25 + 0.10 * idiom_score(d.gold) + 0.15)
    with pytest.raises(ValueError):
        score_completions([d.gold], [answer], formula="nope", executor=executor)


def test_fork_server_verdicts_equal_subprocess_backend(harness, executor):
    programs = []
    for tid, (d, answer) in harness.items():
        hole = Hole.from_answer(answer)
        for body in (d.gold, WRONG[tid], "@@@ not jac", CRASHES):
            programs.append(splice(hole.template, extract_body(body, hole.unit)))
    fork = executor.run_many(programs)
    for prog, f in zip(programs, fork, strict=True):
        s = run_subprocess(prog)
        assert (f.compiled, f.ran, f.exit_code, f.stdout) == (
            s.compiled,
            s.ran,
            s.exit_code,
            s.stdout,
        ), prog


def test_jac_behavioral_signature_and_pairing(harness):
    d, answer = harness["syn_harness_collatz_steps"]
    rewards = jac_behavioral(["p"] * 3, [d.gold, "", "return 0;"], [answer] * 3, types=[None] * 3)
    assert rewards[0] == 1.0 and rewards[1] == 0.0 and 0.0 < rewards[2] < 1.0
    assert jac_behavioral(["p"], [d.gold], [answer]) == [1.0]
    with pytest.raises(ValueError):
        jac_behavioral(["p"] * 3, [d.gold] * 3, [answer, answer])


def test_registered_in_mlx_lm_lora_and_loadable_by_path(harness):
    from mlx_lm_lora.train import load_reward_functions_from_file
    from mlx_lm_lora.trainer import grpo_reward_functions as registry

    import jacrl.ruler.reward

    assert registry.REWARD_REGISTRY["jac_behavioral"] is jacrl.ruler.reward.jac_behavioral
    # what `--reward-functions-file jacrl/ruler/reward.py --reward-functions jac_behavioral` does
    load_reward_functions_from_file(jacrl.ruler.reward.__file__)
    fn = registry.get_reward_function("jac_behavioral")
    d, answer = harness["text_harness_json_braces"]
    assert fn(["p"], [f"```jac\n{d.gold}\n```"], [answer]) == [1.0]


# bodies with no code once comments, blank lines and placeholders are removed
NO_CODE = [
    "# TODO: write the body for this unit",
    "# ...",
    "# compute the steps\n\n# return them",
    "pass",
    "pass;",
    "...",
    "{}",
    "#* the loop\n   goes here *#",
    "{ pass; }\n# ...\n...;",
]


def test_no_code_scores_zero_and_is_never_run(harness, executor):
    for tid, (d, answer) in harness.items():
        completions = (
            NO_CODE
            + [f"```jac\n{b}\n```" for b in NO_CODE]
            + [
                f"<think>\n```jac\n{d.gold}\n```\n",  # an unclosed thought: no answer at all
                f"<think>\n{d.gold}\n</think>\n",
            ]
        )  # only thinking
        scored = score_completions(completions, [answer], executor=executor)
        for c, s in zip(completions, scored, strict=True):
            assert (s.score, s.tier, s.verdict) == (0.0, "empty", None), (tid, c)
    # one honest statement (comment text inside a string is still code) is run and earns credit
    d, answer = harness["syn_harness_collatz_steps"]
    for body in ('return "# x";', "return 0;", "```jac\n# a guess\nreturn n;\n```"):
        s = score_completions([body], [answer], executor=executor)[0]
        assert s.verdict is not None and s.tier == "runs" and s.score > 0.0, (body, s)


# -- the changed-lines share, why a body is not run, time-outs, failed extraction ------------------


def test_changed_lines_compare_whole_lines_spaces_included():
    assert changed_lines("a b\nc d\n", "a b\nc d", None) == 1.0
    assert changed_lines("a b\nc  d\n", "a b\nc d", "a b\nx") == 0.0  # only line 2 depends
    assert changed_lines("a\nb\n", "a b", None) == 0.0


def test_why_a_body_is_not_run():
    assert not_run("") == "no code" and not_run("# only a comment\n") == "no code"
    assert not_run("x = 1;") == ""


def test_a_timed_out_run_matches_no_line_whatever_it_printed(harness):
    """A time-out is the server's observation: what the job printed before it counts for
    nothing, not even the lines it got right."""
    d, answer = next(iter(harness.values()))
    hole = Hole.from_answer(answer)
    out = hole.expected_output
    timed_out = Verdict(True, False, None, out, "", True, 2.0, "timeout")
    s = score(d.gold, timed_out, hole)
    assert (s.tier, s.line_match) == ("compiles", 0.0)
    ran = Verdict(True, True, 0, out, "", False, 0.1, "ok")
    assert score(d.gold, ran, hole).line_match == 1.0


class _Recording:
    """The real executor, recording the time-outs each batch was run with."""

    def __init__(self, executor):
        self.executor, self.timeouts = executor, []

    def run_many(self, sources, timeout=20.0):
        self.timeouts.append(timeout)
        return self.executor.run_many(sources, timeout=timeout)


def test_each_program_runs_with_its_tasks_own_timeout(harness, executor):
    (d1, a1), (d2, a2) = list(harness.values())[:2]
    a2 = json.dumps({**json.loads(a2), "timeout": 1.5})
    rec = _Recording(executor)
    got = score_completions([f"```jac\n{d.gold}\n```" for d in (d1, d2)], [a1, a2], executor=rec)
    assert rec.timeouts == [[json.loads(a1)["timeout"], 1.5]]
    assert [s.score for s in got] == [1.0, 1.0]


def test_a_failed_extraction_is_recorded_as_nothing_graded(harness, executor, monkeypatch):
    """extraction raising: tier none, score, similarity and lines 0, no verdict, the reason
    naming the exception with its message cut at 200 characters; the warning names the line
    that asked for the scores."""
    long = "x" * 300

    def broken(text, unit):
        raise KeyError(long)

    monkeypatch.setattr(reward, "extract_body", broken)
    _, answer = next(iter(harness.values()))
    with pytest.warns(ExtractionWarning, match="KeyError") as rec:
        (s,) = score_completions(["anything"], [answer], executor=executor)
    assert rec[0].filename != reward.__file__  # never a line in reward.py, whoever calls
    assert (s.tier, s.score, s.sim, s.line_match, s.verdict) == ("none", 0.0, 0.0, 0.0, None)
    assert s.reason == f"extraction failed: KeyError: {repr(long)[:200]}: not run"


def test_an_extraction_warning_names_the_line_that_asked_for_the_scores(
    harness, executor, monkeypatch
):
    """The ExtractionWarning points at the caller's own line, not at score_completions' frames
    (bench/mutation.py deselects this test: there a trampoline of the tool is the caller)."""

    def broken(text, unit):
        raise KeyError("x")

    monkeypatch.setattr(reward, "extract_body", broken)
    _, answer = next(iter(harness.values()))
    with pytest.warns(ExtractionWarning, match="KeyError") as rec:
        here, _ = sys._getframe().f_lineno, score_completions(["a"], [answer], executor=executor)
    assert (rec[0].filename, rec[0].lineno) == (__file__, here)


def test_whitespace_inside_a_line_is_not_an_exact_match():
    assert not exact_match("[1,2]", "[1, 2]")
    assert not exact_match("a  b", "a b")
    assert not exact_match("a\n  b", "a\nb")  # indentation of a later line is output too
    assert not exact_match("a\n\nb", "a\nb")
    assert exact_match("\n  [1, 2]\n\n", "[1, 2]")  # only the whole output's edges are stripped
    hole = _hole(expected="[1, 2]")
    assert score("return [1,2];", _ran("[1,2]\n"), hole).tier == "runs"


def _hole(expected: str, baseline: str | None = None, gold: str = "return x;") -> Hole:
    unit = Unit("def", "f", "def f(x: int) -> int", (), "", "")
    return Hole(
        id="t",
        template="def f(x: int) -> int {\n    #HOLE\n}\n",
        gold=gold,
        unit=unit,
        expected_output=expected,
        timeout=5.0,
        baseline_output=baseline,
    )


def _ran(stdout: str) -> Verdict:
    return Verdict(
        compiled=True,
        ran=True,
        exit_code=0,
        stdout=stdout,
        stderr="",
        timed_out=False,
        seconds=0.1,
        status="ok",
    )


def test_default_formula_value_for_a_hand_built_case():
    """dependent: compiled, whatever its exit, = 0.25 sim + 0.55 changed ('ran' is the job's own,
    forgeable claim: docs/threat-model.md); neither 0.10 sim."""
    # two of the three lines that depend on the hole (b, c, d; `a` is the baseline's) match
    hole = _hole("a\nb\nc\nd", baseline="a\nX\nY\nZ", gold="return 1;")
    same = score("return 1;", _ran("a\nb\nQ\nd\n"), hole, "dependent")
    assert (same.tier, same.sim) == ("runs", 1.0)
    assert same.score == round(0.25 * 1.0 + 0.55 * 2 / 3, 4) == 0.6167
    # "return 2;" vs "return 1;": 8 of 9 characters match, ratio 2 * 8 / 18
    near = score("return 2;", _ran("a\nb\nQ\nd\n"), hole, "dependent")
    assert near.sim == pytest.approx(16 / 18)
    assert near.score == round(0.25 * 16 / 18 + 0.55 * 2 / 3, 4) == 0.5889
    failed = dataclasses.replace(_ran(""), ran=False, exit_code=1, status="runtime_error")
    assert score("return 1;", failed, hole, "dependent").score == 0.25
    # what it printed counts, not how it exited
    crashed_late = dataclasses.replace(failed, stdout="a\nb\nQ\nd\n")
    assert score("return 1;", crashed_late, hole, "dependent").score == same.score
    neither = dataclasses.replace(failed, compiled=False, status="compile_error")
    assert score("return 1;", neither, hole, "dependent").score == 0.10
    assert score("return 1;", _ran("a\nb\nc\nd"), hole, "dependent").score == 1.0


def test_line_match_counts_lines_by_position():
    from jacrl.ruler.reward import line_match

    assert line_match("a 1\nQ\nc\n", "a 1\nb\nc") == pytest.approx(2 / 3)
    assert line_match("a", "a\nb") == 0.5


def test_nothing_run_scores_nothing_and_says_why():
    from jacrl.ruler.reward import Scored

    hole = _hole("1")
    assert score("# TODO", None, hole) == Scored(
        "t", 0.0, "empty", "# TODO", 0.0, 0.0, None, "no code"
    )
    assert score("return 1;", None, hole) == Scored("t", 0.0, "none", "return 1;", 0.0, 0.0, None)


def test_one_answer_per_completion_or_one_for_all():
    from jacrl.ruler.reward import _pair

    assert _pair(["x", "y"], ["a"]) == ["a", "a"]
    with pytest.raises(
        ValueError,
        match=r"^2 completions but 3 answers: expected one answer per "
        r"completion \(or a single answer for all\)$",
    ):
        _pair(["x", "y"], ["a", "b", "c"])


def test_a_body_of_exactly_max_body_characters_is_run(harness_tasks, executor):
    from jacrl.ruler.reward import MAX_BODY, score_completions

    task = harness_tasks[0]
    unit = Hole.from_answer(task["answer"]).unit
    pad = "# " + "x" * (MAX_BODY - len("# \nreturn 1;")) + "\nreturn 1;"
    assert len(extract_body(f"```jac\n{pad}\n```", unit)) == MAX_BODY
    (at,) = score_completions([f"```jac\n{pad}\n```"], [task["answer"]], executor=executor)
    (over,) = score_completions([f"```jac\n#{pad}\n```"], [task["answer"]], executor=executor)
    assert at.verdict is not None and at.tier != "none"
    assert over.verdict is None and over.tier == "none"


def test_the_formula_asked_for_is_the_formula_used(harness_tasks):
    from jacrl.ruler.reward import jac_behavioral, reward_function

    task = harness_tasks[0]
    wrong = ["```jac\nreturn 12345;\n```"]  # runs or not, never exact: formulas disagree
    dep = jac_behavioral([""], wrong, [task["answer"]], formula="dependent")
    add = jac_behavioral([""], wrong, [task["answer"]], formula="additive")
    assert dep != add
    assert reward_function("additive")([""], wrong, [task["answer"]]) == add
    assert reward_function("dependent")([""], wrong, [task["answer"]]) == dep
