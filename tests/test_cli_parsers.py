"""Every argparse parser in the house takes options only as written: no abbreviations, so a typo
(`--rung` for `--rungs`) is a one-line usage error, never a silently chosen flag. Every `--help`
opens with a sentence saying what the command does (no internal names), the ladder's lists the
conditions of the table, and `python -m jacrl` is the CLI."""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from pathlib import Path

from jacrl import cli
from jacrl.conditions import CONDITIONS, DEFAULT_CONDITIONS

ROOT = Path(__file__).resolve().parents[1]


def _parsers(ap: argparse.ArgumentParser):
    yield ap
    for action in ap._actions:  # argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def test_every_jacrl_parser_refuses_abbreviations():
    parsers = list(_parsers(cli.build_parser()))
    assert len(parsers) > 20 and all(p.allow_abbrev is False for p in parsers), [
        p.prog for p in parsers if p.allow_abbrev
    ]


def test_an_abbreviated_flag_is_a_one_line_usage_error(capsys):
    assert cli.main(["ladder", "plan", "--rung", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "jacrl: unrecognized arguments: --rung 1 (see jacrl --help)"


def test_every_other_parser_in_the_source_says_allow_abbrev_false():
    """bench/ scripts and the executor's server build their own parsers."""
    missing = []
    for path in [*ROOT.glob("bench/*.py"), *ROOT.glob("jacrl/**/*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "ArgumentParser":
                kw = {k.arg: k.value for k in node.keywords}
                if not (
                    isinstance(kw.get("allow_abbrev"), ast.Constant)
                    and kw["allow_abbrev"].value is False
                ):
                    missing.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert missing == []


def _opening(p: argparse.ArgumentParser) -> str:
    """The paragraph after the usage lines of a parser's --help ("" when options come next)."""
    paragraphs = p.format_help().split("\n\n")
    text = paragraphs[1] if len(paragraphs) > 1 else ""
    return "" if text.startswith(("positional arguments:", "options:")) else text


def test_every_help_opens_with_a_sentence_for_its_user():
    """Its first sentence starts with a capital, ends with a stop and names no code: no backticks,
    no module path (jacrl.x), no function call (a condition's or a file's name may be snake_case:
    the user types those)."""
    bad = []
    for p in _parsers(cli.build_parser()):
        first = re.split(r"(?<=[.?])\s", " ".join(_opening(p).split()), maxsplit=1)[0]
        if not (
            re.match(r"[A-Z][a-z]", first)
            and first.endswith((".", "?"))
            and "`" not in first
            and not re.search(r"\bjacrl\.\w|\b\w+\(", first)
        ):
            bad.append(f"{p.prog}: {first[:80]!r}")
    assert bad == []


def _by_prog(prog: str) -> argparse.ArgumentParser:
    return next(p for p in _parsers(cli.build_parser()) if p.prog == prog)


def test_the_ladders_help_lists_the_conditions_of_the_table():
    text = _by_prog("jacrl ladder").format_help()
    block = text.split("Conditions (", 1)[1].split("\n\n", 1)[0]
    header, *lines = block.splitlines()
    assert [ln.split()[0] for ln in lines if re.match(r"  \S", ln)] == list(CONDITIONS)
    assert header.startswith(f"--conditions; default: {','.join(DEFAULT_CONDITIONS)})")
    conditions = next(a for a in _by_prog("jacrl ladder plan")._actions if a.dest == "conditions")
    listed = re.match(r"of ([\w, ]+) \(env", conditions.help).group(1)
    assert listed.split(", ") == list(CONDITIONS)


def test_the_demos_help_names_where_its_rows_go():
    """A fresh folder under results/demo/ (jacrl.ladder.demo writes there unless told)."""
    from jacrl.ladder.demo import fresh_results_dir
    from jacrl.project import path_or

    results = next(a for a in _by_prog("jacrl demo")._actions if a.dest == "results")
    assert "a fresh results/demo/" in results.help and "project's results/" not in results.help
    fresh = Path(fresh_results_dir())
    assert fresh.parent == path_or(None, "results") / "demo"


def test_python_m_jacrl_is_the_cli():
    done = subprocess.run(
        [sys.executable, "-m", "jacrl", "--help"], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0 and done.stdout == cli.build_parser().format_help()
    done = subprocess.run(
        [sys.executable, "-m", "jacrl", "ladder", "--rung", "1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stderr
