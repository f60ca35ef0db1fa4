"""Task build: the committed corpus and data/ are valid, rebuild byte-identically, and bad drivers
are rejected with one line `path:line: reason` while nothing is written."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from conftest import HARNESS, ROOT

from jacrl import corpus
from jacrl.build import build_tasks
from jacrl.tasks import PROMPT_SENTENCE, load_all, read_tasks


def test_corpus_composition():
    drivers = load_all(ROOT / "drivers")[0]
    n = len(drivers)
    fams = Counter(d.family for d in drivers)
    sources = Counter(d.source for d in drivers)
    assert n >= 200
    assert len(fams) >= 6
    assert fams["osp"] / n >= 0.30
    assert len(sources) >= 25
    assert max(sources.values()) / n <= 0.15
    kinds = Counter(d.unit.kind for d in drivers)
    assert kinds["def"] and kinds["can"] and kinds["impl"]
    assert sum(d.unit.partial for d in drivers) >= 5
    # our corpus policy, the check a build of drivers/ enforces
    assert [p for d in drivers for p in corpus.driver_problems(d)] == []
    assert corpus.corpus_problems(drivers, ROOT / "drivers") == []


def test_committed_data_matches_drivers():
    tasks = read_tasks(ROOT / "data" / "tasks.jsonl")
    ids = [t["meta"]["id"] for t in tasks]
    assert ids == [d.id for d in load_all(ROOT / "drivers")[0]]
    for t in tasks:
        meta = t["meta"]
        assert list(meta)[:4] == ["id", "source", "expected_output", "timeout"]
        assert PROMPT_SENTENCE in t["prompt"]
        assert "# TODO: write the body for this unit" in t["prompt"]
        assert t["prompt"].endswith("\n\n```")
        assert (ROOT / "data" / "templates" / f"{meta['id']}.jac").read_text() == meta["template"]
        assert meta["gold"] not in t["prompt"]


@pytest.mark.slow
def test_rebuild_is_byte_identical(tmp_path):
    report = build_tasks(ROOT / "drivers", tmp_path)
    assert not report.failures
    assert (tmp_path / "tasks.jsonl").read_bytes() == (ROOT / "data" / "tasks.jsonl").read_bytes()
    committed = sorted(p.name for p in (ROOT / "data" / "templates").iterdir())
    assert sorted(p.name for p in (tmp_path / "templates").iterdir()) == committed


def _hole_in_entry_block(text: str) -> str:
    lines = text.split("\n")
    marker = next(ln for ln in lines if ">>>HOLE" in ln).strip()
    lines = [ln for ln in lines if "HOLE" not in ln]
    i = next(k for k, ln in enumerate(lines) if "print(" in ln)
    return "\n".join(
        lines[:i] + ["        " + marker] + [lines[i]] + ["        # <<<HOLE"] + lines[i + 1 :]
    )


BAD = {
    "no_hole": (
        "syn_bad_nohole",
        lambda t: t.replace("# >>>HOLE", "# >>>HOPE"),
        ":1: expected exactly one '>>>HOLE'",
    ),
    "random": (
        "syn_bad_random",
        lambda t: t.replace('"""Harness', 'import random;\n"""Harness').replace(
            'print(f"{n} -> {collatz_steps(n)}");',
            'print(f"{n} -> {collatz_steps(n)} {random.random()}");',
        ),
        "nondeterministic stdout",
    ),
    "hole_unused": (
        "syn_bad_unused",
        lambda t: t.replace("collatz_steps(n)}", "n}"),
        "empty body gives the same output",
    ),
    "gold_crashes": (
        "syn_bad_crash",
        lambda t: t.replace("steps = 0;", "steps = 0 / 0;"),
        "does not run clean",
    ),
    "outside_unit": ("syn_bad_outside", lambda t: _hole_in_entry_block(t), "is not inside"),
}


def test_bad_drivers_are_rejected_and_nothing_is_written(tmp_path):
    src = next(p for p in HARNESS if "collatz" in p.name).read_text()
    drivers = tmp_path / "drivers"
    drivers.mkdir()
    expected = {}
    for new_id, edit, why in BAD.values():
        text = edit(src).replace("syn_harness_collatz_steps", new_id)
        (drivers / f"{new_id}.jac").write_text(text)
        expected[new_id] = why
    shutil.copy(next(p for p in HARNESS if "json_braces" in p.name), drivers)
    out = tmp_path / "data"
    report = build_tasks(drivers, out)
    assert len(report.failures) == len(BAD)
    for line in report.failures:
        path, lineno, why = line.split(":", 2)
        assert Path(path).parent == drivers and lineno.isdigit() and "\n" not in line
        assert expected[Path(path).stem] in line, line
    assert not (out / "tasks.jsonl").exists() and not (out / "templates").exists()


def test_answer_record_round_trips_through_the_reward(harness_tasks):
    from jacrl.reward import score_completions

    for t in harness_tasks:
        meta = json.loads(t["answer"])
        assert score_completions([f"```jac\n{meta['gold']}\n```"], [t["answer"]])[0].score == 1.0


def _driver(tid: str, head: str, entry: str) -> str:
    return (
        f"# Source: apps/harness\n{head}\n"
        "def double(x: int) -> int {\n"
        f'    # >>>HOLE id="{tid}" instruction="Return twice x."\n'
        "    return x * 2;\n"
        "    # <<<HOLE\n"
        "}\n\n"
        f"with entry {{\n    {entry}\n}}\n"
    )


def test_build_errors_name_the_real_cause(tmp_path):
    drivers = tmp_path / "drivers"
    drivers.mkdir()
    nomod = drivers / "syn_bad_nomod.jac"
    nomod.write_text(_driver("syn_bad_nomod", "import nosuchmod;\n", "print(double(2));"))
    silent = drivers / "syn_bad_silent.jac"
    silent.write_text(_driver("syn_bad_silent", "", "double(2);"))
    out = tmp_path / "data"
    report = build_tasks(drivers, out)
    assert report.failures == [
        f"{nomod}:2: driver does not run clean (runtime_error): Error: No module named 'nosuchmod'",
        f"{silent}:1: driver prints nothing (its stdout is empty)",
    ]
    assert not out.exists() or not any(out.iterdir())
