"""Every argparse parser in the house takes options only as written: no abbreviations, so a typo
(`--rung` for `--rungs`) is a one-line usage error, never a silently chosen flag."""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

from jacrl import cli

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
