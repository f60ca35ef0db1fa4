"""Contracts that mutants of bench/mutation.py's modules survived (docs/mutation.md): each test
states one rule of the module and fails when the mutant named in its docstring is put in."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import warnings

import pytest
from conftest import ROOT

from jacrl import jacsyntax, jsonl, provenance, splits
from jacrl.drivers import UNKNOWN_SOURCE
from jacrl.extract import HOLE_TOKEN, Unit, answer_text, code_blocks, dedent, extract_body, splice
from jacrl.tasks import meta, prompt_answer, read_tasks

# -- the extractor ---------------------------------------------------------------------------


def test_two_brackets_opened_on_one_line_are_two_levels_for_dedent():
    """jacrl.extract._line_depths (`depth = 1` for `depth += 1`): `f(g(` leaves the next lines
    two levels deep, so `), 2)` is still inside a bracket, not a statement, and the first
    line's shallower margin is no reason to cut the later lines."""
    body = "x = f(g(\n        1\n    ), 2)"
    assert dedent(body) == body
    # with a line back at depth 0 the later lines are cut to their own margin
    assert dedent("x = f(g(1))\n    y = 2\n    z = 3") == "x = f(g(1))\ny = 2\nz = 3"


def test_a_stray_closer_closes_one_bracket_for_dedent():
    """jacrl.extract._line_depths (`depth - 2` at a closer): `f((a),` leaves the next lines one
    level deep, so they are arguments, not statements, and nothing is cut."""
    body = "x = f((a),\n        1,\n        2)"
    assert dedent(body) == body


def test_everything_up_to_the_last_think_close_is_thinking():
    """answer_text (`find` for `rfind`): a prompt that opened <think> leaves the completion's
    thinking up to its last </think>, however many the thinking names."""
    text = "I might write </think> here.\nStill thinking.</think>\n```jac\nreturn 1;\n```"
    assert answer_text(text) == "\n```jac\nreturn 1;\n```"


def test_a_backtick_fence_with_a_backtick_in_its_info_is_not_a_fence_a_tilde_one_is():
    """code_blocks (CommonMark: a backtick fence's info string has no backtick)."""
    assert code_blocks("``` a`b\nx = 1;\n```jac\ny = 2;\n```") == ["y = 2;\n"]
    assert code_blocks("~~~ a`b\nx = 1;\n~~~") == ["x = 1;\n"]


def test_a_whole_unit_with_a_braced_decorator_is_unwrapped_at_its_own_brace():
    """extract_body (`mask.find("{", m.end())`): the brace after `def`, not one in a decorator."""
    unit = Unit("def", "f", "def f() -> int", (), "", "")
    completion = "```jac\n@cache({})\ndef g() -> int {\n    return 1;\n}\n```"
    assert extract_body(completion, unit) == "return 1;"


def test_splice_says_how_many_hole_lines_a_bad_template_has():
    with pytest.raises(
        ValueError, match=f"^template must have exactly one {HOLE_TOKEN} line, has 2$"
    ):
        splice(f"a\n{HOLE_TOKEN}\n{HOLE_TOKEN}\n", "x = 1;")
    with pytest.raises(ValueError, match=" line, has 0$"):
        splice("a\n", "x = 1;")


# -- the executor server's judging (its verdict code runs in the collector, outside the zygote) --


def _server():
    from jacrl.executor import server

    return server


def _exited(code: int) -> int:
    return code << 8  # a wait status: exited with `code`


def _judge(sealed=b"C", wstatus=0, timed_out=False, completed=True, stderr="", **kw):
    s = _server()
    return s.verdict(
        s.child.COMPILED if sealed == b"C" else sealed,
        wstatus,
        timed_out,
        completed,
        kw.pop("stdout", "out\n"),
        stderr,
        kw.pop("seconds", 0.5),
        kw.pop("stderr_lines", 40),
        **kw,
    )


def test_a_job_that_compiled_and_completed_is_ok():
    v = _judge(seconds=1.23456789, cpu_seconds=0.98765432)
    assert v == dict(
        compiled=True,
        ran=True,
        exit_code=0,
        stdout="out\n",
        stderr="",
        timed_out=False,
        seconds=1.234568,
        status="ok",
        cpu_seconds=0.987654,
    )
    assert _judge()["cpu_seconds"] == 0.0  # not measured: zero


def test_each_way_a_job_ends_has_its_status():
    assert _judge(completed=False)["status"] == "early_exit"  # exit 0 but entry never returned
    v = _judge(wstatus=_exited(3))
    assert (v["status"], v["exit_code"], v["ran"], v["compiled"]) == (
        "runtime_error",
        3,
        False,
        True,
    )
    parsed = _judge(sealed=_server().child.PARSED, wstatus=_exited(1), completed=False)
    assert (parsed["status"], parsed["compiled"], parsed["exit_code"]) == ("compile_error", True, 1)
    # nothing sealed: did not even parse, whatever its exit
    for code in (0, 1):
        v = _judge(sealed=b"", wstatus=_exited(code), completed=False)
        assert (v["status"], v["compiled"], v["ran"]) == ("compile_error", False, False)
    v = _judge(wstatus=9)  # killed by SIGKILL
    assert (v["status"], v["exit_code"], v["ran"]) == ("killed:SIGKILL", None, False)
    v = _judge(wstatus=9, timed_out=True)  # killed for its time: a time-out, not a kill
    assert (v["status"], v["exit_code"], v["timed_out"], v["ran"]) == ("timeout", None, True, False)
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
    for field in ("'{'", "xf'{'", "_f'{'", "f'{'{'}'", "f'{'{{'}'", "F'{1}'", "rf'{'}'}'"):
        assert _second_line('s = f"{' + field + '}"\nt = 1') == "t = 1", field


def test_a_header_inside_brackets_finds_its_body():
    """_HeaderBraces.__call__ (the header's own bracket level, not 0)."""
    assert [(h.name, h.brace) for h in jacsyntax.headers("x = f(def g() { 1 });")] == [("g", 14)]


def test_a_position_after_every_brace_is_inside_nothing():
    """enclosing_names (`j <= len(braces)`): positions past the last brace."""
    assert jacsyntax.enclosing_names("a { b } c", {2: "a"}, [9], 3) == [()]
    assert jacsyntax.enclosing_names("a { b c", {2: "a"}, [6, 1], 3) == [("a",), ()]


def test_enclosing_blocks_of_positions_at_inside_and_after_braces():
    """enclosing_many (`j <= len(braces)`, `braces[j] <= p`): a position at a `{` is not inside
    its block, one after it is, one past every brace is inside nothing."""
    mask = "a { b } c { {"
    got = jacsyntax.enclosing_many(mask, [2, 4, 8, 13, 11])
    assert got == [[], [2], [], [10, 12], [10]]


# -- the splits (jacrl.splits) ---------------------------------------------------------------


def _task(tid: str, family: str, source: str, gold: str = "") -> dict:
    m = {"id": tid, "family": family, "source": source, "gold": gold or f"x = '{tid}';"}
    return {"prompt": tid, "answer": json.dumps(m), "meta": m}


def test_sources_are_picked_until_every_family_is_held_and_no_further():
    """_pick_sources (`covered = ...` for `|=`): families held so far accumulate."""
    tasks = [_task("a", "x", "A"), _task("b", "y", "B"), _task("c", "x", "C")]
    chosen = splits._pick_sources(tasks, need=1, seed=0)
    assert len(chosen) == 2 and {"B"} < set(chosen)


def test_unsourced_holdout_gets_a_missing_family_first_and_never_all_tasks():
    """_pick_unsourced (the rest after `first`, without repeating it)."""
    tasks = [
        _task("x1", "x", UNKNOWN_SOURCE),
        _task("x2", "x", UNKNOWN_SOURCE),
        _task("y1", "y", UNKNOWN_SOURCE),
        _task("y2", "y", UNKNOWN_SOURCE),
    ]
    assert [meta(t)["family"] for t in splits._pick_unsourced(tasks, 1, {"x"}, 0)] == ["y"]
    got = splits._pick_unsourced(tasks, 10, {"x", "y"}, 0)  # never all: half at most
    assert len(got) == 2 and len({id(t) for t in got}) == 2
    got = splits._pick_unsourced(tasks, 2, set(), 0)
    assert sorted(meta(t)["family"] for t in got) == ["x", "y"]


def test_valid_takes_from_the_largest_family_first():
    """make_splits (valid's families ordered by how many tasks they have left)."""
    tasks = [
        _task("h1", "a", "H"),
        _task("h2", "b", "H"),
        _task("p1", "a", "P1"),
        *[_task(f"q{i}", "b", f"Q{i}") for i in range(3)],
    ]
    s = splits.make_splits(tasks, splits.SplitConfig(holdout_min=1, valid_n=1))
    assert [meta(t)["family"] for t in s.valid] == ["b"]


def test_build_writes_loads_and_reports_the_splits_of_its_own_data_dir(tmp_path):
    """build_splits / write_splits / load_split / rung read and write `data_dir`, not the
    project's data/; report shows the dropped ids ('-' for none) and the self-check."""
    s0 = splits.make_splits(read_tasks(ROOT / "data" / "tasks.jsonl"))
    drop = meta(s0.trainpool[-1])["id"]
    tasks = [t for t in read_tasks(ROOT / "data" / "tasks.jsonl") if meta(t)["id"] != drop]
    with open(tmp_path / "tasks.jsonl", "w") as fh:
        fh.writelines(json.dumps(prompt_answer(t)) + "\n" for t in tasks)
    s = splits.build_splits(tmp_path)
    want = splits.make_splits(tasks)
    for name in splits.SPLITS:
        rows = [prompt_answer(t) for t in getattr(want, name)]
        assert splits.load_split(name, tmp_path) == rows
        assert (tmp_path / "splits" / f"{name}.jsonl").read_text() == "".join(
            json.dumps(r) + "\n" for r in rows
        )
    assert len(splits.rung("all", tmp_path)) == len(want.trainpool) == len(s0.trainpool) - 1
    text = splits.report(dataclasses.replace(s, dropped=[]))
    assert "decontamination dropped 0: -" in text and text.endswith("self-check: OK")
    bad = splits.report(dataclasses.replace(s, trainpool=[]))
    assert bad.endswith(
        "self-check: the train pool is empty (the holdout took every task; lower holdout_min)"
    )


def test_a_pool_of_five_from_one_family_is_flagged():
    """check_splits (`>= 5`, its message)."""
    s = splits.Splits(
        holdout=[_task("h", "x", "H")],
        valid=[],
        dropped=[],
        holdout_sources=["H"],
        trainpool=[_task(f"p{i}", "x", f"P{i}") for i in range(5)],
    )
    assert splits.check_splits(s) == ["rung 5 spans fewer than 2 families"]


def test_a_pool_whose_first_five_span_two_families_passes():
    """check_splits (`< 2` families in rung 5, not `< 3`)."""
    s = splits.Splits(
        holdout=[_task("h", "x", "H"), _task("i", "y", "H")],
        valid=[],
        dropped=[],
        holdout_sources=["H"],
        trainpool=[_task(f"p{i}", "xy"[i % 2], f"P{i}") for i in range(5)],
    )
    assert splits.check_splits(s) == []


def test_the_report_names_each_rung_and_every_problem():
    """report: one line per rung that fits, by its number; the self-check joins every problem."""
    s = splits.Splits(
        holdout=[_task("p0", "x", "P0")],  # also in the train pool: a leak
        valid=[],
        dropped=[],
        holdout_sources=["P0"],
        trainpool=[_task(f"p{i}", "x", f"P{i}") for i in range(5)],
    )
    problems = splits.check_splits(s)
    text = splits.report(s)
    assert len(problems) >= 2 and text.endswith("self-check: " + "; ".join(problems))
    assert "rung   1: x 1" in text and "rung   5: x 5" in text


def test_the_default_data_dir_is_the_projects(tmp_path):
    """load_split with no data dir reads the project's data/splits; write_splits makes every
    missing folder of its own."""
    assert splits.load_split("holdout") == splits.load_split("holdout", ROOT / "data")
    s = splits.make_splits(read_tasks(ROOT / "data" / "tasks.jsonl"))
    splits.write_splits(s, tmp_path / "new" / "data")
    assert splits.load_split("valid", tmp_path / "new" / "data") == [
        prompt_answer(t) for t in s.valid
    ]


# -- JSON Lines (jacrl.jsonl) ------------------------------------------------------------------


def test_write_and_append_make_missing_folders(tmp_path):
    jsonl.write(tmp_path / "a" / "b" / "w.jsonl", [{"k": 1}])
    jsonl.append(tmp_path / "c" / "d" / "a.jsonl", {"k": 2})
    assert jsonl.read(tmp_path / "a" / "b" / "w.jsonl") == [{"k": 1}]
    assert jsonl.read(tmp_path / "c" / "d" / "a.jsonl") == [{"k": 2}]


def test_appending_after_a_whole_last_line_warns_of_nothing(tmp_path):
    """append (`os.pread(fd, 1, size - 1)`: the file's last byte is the one checked)."""
    path = tmp_path / "r.jsonl"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for k in range(3):
            jsonl.append(path, {"k": k})
    assert path.read_text() == '{"k": 0}\n{"k": 1}\n{"k": 2}\n'


def test_a_line_with_bytes_that_are_not_utf8_is_read_with_replacements(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"k": "a\xffb"}\n')
    assert jsonl.read(path) == [{"k": "a\ufffdb"}]


def test_the_last_line_start_is_found_at_offset_one_of_a_long_file(tmp_path):
    """last_line_start (`pos > 0`): a newline at offset 0 is found after a 64 KiB read."""
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"\n" + b"x" * (1 << 16))
    fd = os.open(path, os.O_RDONLY)
    try:
        assert jsonl.last_line_start(fd, (1 << 16) + 1) == 1
    finally:
        os.close(fd)


def _points_here(warning, module) -> bool:
    """The warning points at this file's line, never into `module`. Under mutmut a trampoline in
    mutmut's own file sits between a caller and the module's functions: there it points at that
    frame, still outside the module (mutmut runs pytest in its own process)."""
    outside = warning.filename != module.__file__
    return outside and (warning.filename == __file__ or "mutmut" in sys.modules)


def test_a_torn_line_warning_names_the_callers_line(tmp_path):
    """append and read warn of a torn last line at the line that called them (not in jsonl.py)."""
    path = tmp_path / "r.jsonl"
    path.write_text('{"k": 1}\n{"k": ')
    with pytest.warns(UserWarning, match="skipped a torn last line") as rec:
        assert jsonl.read(path) == [{"k": 1}]
    assert _points_here(rec[0], jsonl)
    with pytest.warns(UserWarning, match="dropped a torn last line") as rec:
        jsonl.append(path, {"k": 2})
    assert _points_here(rec[0], jsonl) and jsonl.read(path) == [{"k": 1}, {"k": 2}]


def test_records_are_written_as_utf8_whatever_the_locale(tmp_path):
    """write: the file is UTF-8 even where the locale's encoding is ASCII (a bare container
    with LC_ALL=C and neither locale coercion nor UTF-8 mode)."""
    import subprocess
    import sys

    import jacrl

    path = tmp_path / "w.jsonl"
    code = "import sys; from jacrl import jsonl; jsonl.write(sys.argv[1], [{'name': 'Jos\\u00e9'}])"
    env = {
        **os.environ,
        "LC_ALL": "C",
        "PYTHONCOERCECLOCALE": "0",
        "PYTHONUTF8": "0",
        "PYTHONPATH": os.path.dirname(os.path.dirname(jacrl.__file__)),
    }
    subprocess.run([sys.executable, "-X", "utf8=0", "-c", code, str(path)], env=env, check=True)
    assert path.read_bytes() == '{"name": "José"}\n'.encode()
    # the same call in this process too (so mutmut, which traces in-process calls, runs this
    # test for `write`'s mutants; each gets MUTANT_UNDER_TEST and this PYTHONPATH)
    jsonl.write(tmp_path / "here.jsonl", [{"name": "José"}])
    assert (tmp_path / "here.jsonl").read_bytes() == path.read_bytes()


# -- provenance: is a row's adapter the one on disk / in another row? --------------------------


def _row(key="", weights="", adapter="", code="", model="") -> dict:
    return {
        "artifact": key,
        "provenance": {
            "adapter_weights_hash": weights,
            "adapter_hash": adapter,
            "code_version": code,
            "model_hash": model,
        },
    }


def test_rows_verdict_tells_same_noise_changed_and_unknown():
    same = _row("k" * 20, "w1", "d1", "c1", "m1")
    assert provenance.rows_verdict(same, dict(same)) == ""
    assert provenance.rows_verdict({}, {"provenance": None}) == ""  # no adapter in either
    assert provenance.rows_verdict(same, _row("k" * 20, "w2", "d2", "c1", "m1")) == provenance.NOISE
    assert provenance.rows_verdict(same, _row("j" * 20, "w2", "d2", "c2", "m1")) == (
        f"{provenance.CHANGED} (artifact key {'k' * 16} -> {'j' * 16}; code differs)"
    )
    assert provenance.rows_verdict(same, _row("j" * 20, "w2", "d2", "c2", "m2")) == (
        f"{provenance.CHANGED} (artifact key {'k' * 16} -> {'j' * 16}; code differs; "
        "base model differs)"
    )
    # a key change where neither record says what: no reasons
    assert provenance.rows_verdict(_row("k" * 20, "w1"), _row("j" * 20, "w2")) == (
        f"{provenance.CHANGED} (artifact key {'k' * 16} -> {'j' * 16})"
    )
    # a row without weights hashes: the same key rebuilt cannot be told from noise
    assert provenance.rows_verdict(_row("k", "", "d1"), _row("k", "", "d2")) == provenance.UNKNOWN
    assert provenance.rows_verdict(_row("k", "", "d1"), _row("k", "", "d1")) == ""
    assert provenance.rows_verdict(_row("", "", "d1"), _row("", "", "d2")) == provenance.UNKNOWN
    assert provenance.rows_verdict(_row("k", "", "d1"), _row("", "", "d2")) == (
        "adapter changed (no artifact key to tell noise from changed inputs)"
    )
    # the same weights are the same adapter, whatever the dir hashes say
    assert provenance.rows_verdict(_row("k", "w", "d1"), _row("k", "w", "d2")) == ""


def test_adapter_key_is_the_manifests_key_or_empty(tmp_path):
    assert provenance.adapter_key(None) == "" and provenance.adapter_key(tmp_path) == ""
    (tmp_path / "manifest.json").write_text('{"key": "abc"}')
    assert provenance.adapter_key(tmp_path) == "abc"
    (tmp_path / "manifest.json").write_text('{"other": 1}')
    assert provenance.adapter_key(str(tmp_path)) == ""
    (tmp_path / "manifest.json").write_text("not json")
    assert provenance.adapter_key(tmp_path) == ""
