"""Contracts that mutants of bench/mutation.py's modules survived (docs/mutation.md): each test
states one rule of the module and fails when the mutant named in its docstring is put in."""

from __future__ import annotations

import signal

from jacrl import jacsyntax
from jacrl.extract import dedent

# -- the extractor ---------------------------------------------------------------------------


def test_two_brackets_opened_on_one_line_are_two_levels_for_dedent():
    """jacrl.extract._line_depths (`depth = 1` for `depth += 1`): `f(g(` leaves the next lines
    two levels deep, so `), 2)` is still inside a bracket, not a statement, and the first
    line's shallower margin is no reason to cut the later lines."""
    body = "x = f(g(\n        1\n    ), 2)"
    assert dedent(body) == body
    # with a line back at depth 0 the later lines are cut to their own margin
    assert dedent("x = f(g(1))\n    y = 2\n    z = 3") == "x = f(g(1))\ny = 2\nz = 3"


# -- the executor server's judging (its verdict code runs in the collector, outside the zygote) --

def _server():
    from jacrl.executor import server

    return server


def _exited(code: int) -> int:
    return code << 8  # a wait status: exited with `code`


def _judge(sealed=b"C", wstatus=0, timed_out=False, completed=True, stderr="", **kw):
    s = _server()
    return s.verdict(s.child.COMPILED if sealed == b"C" else sealed, wstatus, timed_out,
                     completed, kw.pop("stdout", "out\n"), stderr, kw.pop("seconds", 0.5),
                     kw.pop("stderr_lines", 40), **kw)


def test_a_job_that_compiled_and_completed_is_ok():
    v = _judge(seconds=1.23456789, cpu_seconds=0.98765432)
    assert v == dict(compiled=True, ran=True, exit_code=0, stdout="out\n", stderr="",
                     timed_out=False, seconds=1.234568, status="ok", cpu_seconds=0.987654)
    assert _judge()["cpu_seconds"] == 0.0  # not measured: zero


def test_each_way_a_job_ends_has_its_status():
    assert _judge(completed=False)["status"] == "early_exit"  # exit 0 but entry never returned
    v = _judge(wstatus=_exited(3))
    assert (v["status"], v["exit_code"], v["ran"], v["compiled"]) == ("runtime_error", 3,
                                                                     False, True)
    parsed = _judge(sealed=_server().child.PARSED, wstatus=_exited(1), completed=False)
    assert (parsed["status"], parsed["compiled"], parsed["exit_code"]) == ("compile_error",
                                                                           True, 1)
    # nothing sealed: did not even parse, whatever its exit
    for code in (0, 1):
        v = _judge(sealed=b"", wstatus=_exited(code), completed=False)
        assert (v["status"], v["compiled"], v["ran"]) == ("compile_error", False, False)
    v = _judge(wstatus=9)  # killed by SIGKILL
    assert (v["status"], v["exit_code"], v["ran"]) == ("killed:SIGKILL", None, False)
    v = _judge(wstatus=9, timed_out=True)  # killed for its time: a time-out, not a kill
    assert (v["status"], v["exit_code"], v["timed_out"], v["ran"]) == ("timeout", None,
                                                                       True, False)
    assert _judge(wstatus=0, timed_out=True)["status"] == "timeout"


def test_the_verdict_keeps_the_first_stderr_lines_only():
    assert _judge(stderr="a\nb\nc\n", stderr_lines=2)["stderr"] == "a\nb\n"
    assert _judge(stderr="a\nb", stderr_lines=5)["stderr"] == "a\nb"


def test_a_job_is_over_its_cpu_only_when_killed_for_it():
    s = _server()
    job = {"timeout": 1.0, "cpu": 0.2}
    assert not s._over_cpu(_exited(0), {**job, "over_cpu": True})  # it exited by itself
    assert s._over_cpu(signal.SIGXCPU, job)  # RLIMIT_CPU's backstop
    assert s._over_cpu(signal.SIGTERM, {**job, "over_cpu": True})  # the zygote's own kill
    assert not s._over_cpu(signal.SIGTERM, job)
    assert not s._over_cpu(signal.SIGKILL, job)  # killed, but under its CPU limit
    assert s._over_cpu(signal.SIGKILL, {**job, "cpu": 1.0})  # at the limit
    assert s._over_cpu(signal.SIGKILL, {**job, "cpu": 1.5})
    assert not s._over_cpu(signal.SIGKILL, {**job, "cpu": 0.999})


# -- the Jac lexer (jacrl.jacsyntax) -----------------------------------------------------------

def _second_line(text: str) -> str:
    return jacsyntax.code_mask(text).split("\n")[1]


def test_a_single_quoted_string_left_open_ends_at_its_line():
    """_string_end (`c == "XX\\nXX"`): the next line is code again."""
    assert jacsyntax.code_mask('s = "abc\nt = {1}') == "s =     \nt = {1}"


def test_a_replacement_field_spans_lines_and_a_runaway_one_ends_at_its_line():
    """_string_end (`c == "\\n" or top[0] > 8`): a field's newline does not end it; only one
    more than 8 braces deep does."""
    assert jacsyntax.code_mask("s = f'{\n}' + 'a'\nt = 1") == "s =    \n   +    \nt = 1"
    assert _second_line('s = f"{{{{{{{{{{x\ny = {1}') == "y = {1}"


def test_strings_nested_in_a_replacement_field_are_strings():
    """_string_end (the string-prefix checks inside a field): a quote or a prefix letter not
    glued to a name opens a nested string (an f-string when its prefix has an f), and the code
    after the outer string stays code."""
    for field in ("'{'", "xf'{'", "_f'{'", "f'{'{'}'", "f'{'{{'}'", "F'{1}'",
                  "rf'{'}'}'"):
        assert _second_line('s = f"{' + field + '}"\nt = 1') == "t = 1", field


def test_a_header_inside_brackets_finds_its_body():
    """_HeaderBraces.__call__ (the header's own bracket level, not 0)."""
    assert [(h.name, h.brace) for h in jacsyntax.headers("x = f(def g() { 1 });")] == [("g", 14)]


def test_a_position_after_every_brace_is_inside_nothing():
    """enclosing_names (`j <= len(braces)`): positions past the last brace."""
    assert jacsyntax.enclosing_names("a { b } c", {2: "a"}, [9], 3) == [()]
    assert jacsyntax.enclosing_names("a { b c", {2: "a"}, [6, 1], 3) == [("a",), ()]
