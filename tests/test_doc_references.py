"""Docs that cannot drift: every backticked `jacrl.x.y` (or `jacrl/x.py`) in the README, docs/ and
the package's docstrings names a real module or attribute, every backticked `jacrl VERB` is a real
command, and every reward formula, ladder condition and training stage named in prose exists.

A name counts as a formula/condition/stage when it is backticked right beside the word ("the
`tiered` formula", "conditions `sft` and `sft_grpo`", "`--reward-formula additive`") or sits in a
table column headed by that word. The names come from the modules that own them (`_names`)."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SPAN = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(r"(?<![\w./-])jacrl(?:\.\w+)+")
PATH = re.compile(r"(?<![\w./-])jacrl/[\w/]*(?:\.py)?")
COMMAND = re.compile(r"^(?:python -m jacrl(?:\.cli)?|jacrl)((?: [a-z][\w|-]*)+)")
NAMES = r"`[\w-]+`(?:(?:,|,? and|,? or| \||/) `[\w-]+`)*"
KINDS = ("formula", "condition", "stage")
BESIDE = [
    re.compile(rf"\b(?P<kind>{'|'.join(KINDS)})s? (?P<names>{NAMES})"),
    re.compile(rf"(?P<names>{NAMES}) (?P<kind>{'|'.join(KINDS)})s?\b"),
    re.compile(r"(?P<kind>formula)`? \((?P<names>\w+(?: ?\| ?\w+)+)\)"),
    re.compile(r"--reward-(?P<kind>formula)[ =](?P<names>[\w|-]+)"),
    re.compile(r"--(?P<kind>condition)s?[ =](?P<names>[\w,|-]+)"),
]


def _names() -> dict[str, set[str]]:
    """The names prose may use, read from their owners (repoint here when a table moves)."""
    from jacrl.conditions import CONDITIONS
    from jacrl.config import REWARD_FORMULAS
    from jacrl.stages import STAGES

    return {"formula": set(REWARD_FORMULAS), "condition": set(CONDITIONS), "stage": set(STAGES)}


def texts() -> list[tuple[str, str]]:
    """(where, text): each README/docs page, and each docstring of jacrl/ with its first line."""
    found = [(str(p.relative_to(ROOT)), p.read_text()) for p in PAGES]
    for path in sorted((ROOT / "jacrl").rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    line = node.body[0].lineno
                    found.append((f"{path.relative_to(ROOT)}:{line}", doc))
    return found


def unresolved(dotted: str) -> str:
    """Why `jacrl.a.b.c` names nothing real ("" when it is a module or a module's attribute
    chain). A function, class or module reached through a plain module that only imports it is
    cited at the wrong home (packages may re-export: that is their public face)."""
    parts = dotted.split(".")
    cut = next((c for c in range(len(parts), 0, -1) if _module(".".join(parts[:c]))), 0)
    if not cut:
        return "is no module"
    obj = _module(".".join(parts[:cut]))
    for name in parts[cut:]:
        if not hasattr(obj, name):
            return f"is no module or attribute ({'.'.join(parts[:cut])} has no {name})"
        parent, obj = obj, getattr(obj, name)
        home = getattr(obj, "__name__" if inspect.ismodule(obj) else "__module__", None)
        if (
            inspect.ismodule(parent)
            and not hasattr(parent, "__path__")
            and home
            and (inspect.ismodule(obj) or inspect.isclass(obj) or inspect.isfunction(obj))
            and home != parent.__name__
        ):
            return f"is only imported there: it lives in {home}"
    return ""


def _module(name: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError:
        return None


def _verbs():
    """{verb: set of its sub-verbs (empty when it has none)} from the real parser."""
    import argparse

    from jacrl.cli import build_parser

    def choices(parser):
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        return subs[0].choices if subs else {}

    return {verb: set(choices(p)) for verb, p in choices(build_parser()).items()}


def problems(where: str, text: str) -> list[str]:
    """Every reference in one text that names nothing real, as 'where: `ref` why'."""
    names, verbs = _names(), _verbs()
    bad = []
    prose = re.sub(r"\s+", " ", text)
    for span in SPAN.findall(text):
        for ref in DOTTED.findall(span):
            if not (ROOT / ref).exists() and "__mutmut_" not in ref and (why := unresolved(ref)):
                bad.append(f"{where}: `{ref}` {why}")
        for ref in PATH.findall(span):
            if not (ROOT / ref).exists():
                bad.append(f"{where}: `{ref}` no such file")
        if m := COMMAND.match(span):
            words = m.group(1).split()
            if words[0] not in verbs:
                bad.append(f"{where}: `jacrl {words[0]}` is no verb")
            elif verbs[words[0]] and len(words) > 1:
                bad += [
                    f"{where}: `jacrl {words[0]} {w}` is no verb"
                    for w in words[1].split("|")
                    if w not in verbs[words[0]]
                ]
            if words[0] == "train" and len(words) > 1 and "|" in words[1]:
                if set(words[1].split("|")) < names["stage"]:
                    bad.append(
                        f"{where}: `jacrl train {words[1]}` leaves out "
                        f"{', '.join(sorted(names['stage'] - set(words[1].split('|'))))}"
                    )
    for pattern in BESIDE:
        for m in pattern.finditer(prose):
            kind, listed = m.group("kind"), set(re.findall(r"[\w-]+", m.group("names")))
            listed -= {"and", "or"}
            bad += [f"{where}: {kind} `{name}` does not exist" for name in listed - names[kind]]
            if "|" in m.group("names") and listed < names[kind]:  # the choices, some missing
                bad.append(
                    f"{where}: {kind}s {' | '.join(sorted(listed))} leave out "
                    f"{', '.join(sorted(names[kind] - listed))}"
                )
    return bad + _table_problems(where, text, names)


def _table_problems(where: str, text: str, names: dict[str, set[str]]) -> list[str]:
    """Cells of a markdown table column headed `formula`/`condition`/`stage` (any case, plural)."""
    bad, column = [], {}
    for line in text.splitlines():
        if not line.startswith("|"):
            column = {}
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not column:
            column = {
                i: k
                for i, c in enumerate(cells)
                for k in KINDS
                if re.fullmatch(rf"{k}s?", c.lower())
            }
            continue
        for i, kind in column.items():
            cell = cells[i].strip("`* ") if i < len(cells) else ""
            if cell and not set(cell) <= set("-: ") and cell not in names[kind]:
                bad.append(f"{where}: {kind} `{cell}` (table) does not exist")
    return bad


TEXTS = texts()


@pytest.mark.parametrize("file", sorted({w.split(":")[0] for w, _ in TEXTS}))
def test_every_reference_resolves(file):
    assert [
        p for where, text in TEXTS if where.split(":")[0] == file for p in problems(where, text)
    ] == []


def test_the_checker_catches_each_kind_of_drift(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "See `jacrl.no_such_module`, `jacrl.config.NO_SUCH_NAME`, `jacrl/nowhere.py` and\n"
        "`jacrl.train.sft.tracking` (imported by sft, defined in jacrl.train.tracking);\n"
        "the `sft_dpo_x` condition, the `quadratic` formula, the stage `distill`,\n"
        "`cfg.reward_formula` (tiered | additive), `jacrl train sft|rft`,\n"
        "`jacrl nosuchverb` and `jacrl ladder fly`.\n\n"
        "| condition | pass@1 |\n|---|---|\n| `sft` | 0.1 |\n| `bogus` | 0.2 |\n"
    )
    found = problems("page.md", page.read_text())
    for part in (
        "`jacrl.no_such_module` is no module",
        "`jacrl.config.NO_SUCH_NAME` is no",
        "`jacrl/nowhere.py` no such file",
        "it lives in jacrl.train.tracking",
        "condition `sft_dpo_x`",
        "formula `quadratic`",
        "stage `distill`",
        "formulas additive | tiered leave out dependent",
        "`jacrl train sft|rft` leaves",
        "`jacrl nosuchverb`",
        "`jacrl ladder fly`",
        "condition `bogus` (table)",
    ):
        assert any(part in p for p in found), (part, found)
    assert len(found) == 12, found
    # and what exists passes: a module, an attribute, a re-export by a package, a file, names in
    # prose and a verb
    page.write_text(
        "`jacrl.config.REWARD_FORMULAS`, `jacrl.executor.Executor`, `jacrl/config.py`,"
        " the `tiered` formula, conditions `sft` and `sft_grpo`, `jacrl ladder run`,"
        " `--reward-formula dependent|tiered|additive`\n"
    )
    assert problems("page.md", page.read_text()) == []
