"""Python -> Jac conversion tasks: every sidecar in drivers/python/ prints its driver's stdout when
run as Python in the sandboxed executor, a conversion task grades exactly like its hole-fill task,
a wrong sidecar fails the build with `path:line`, and the prompt is the earlier harness's format."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from conftest import HARNESS, ROOT

from jacrl.ruler.reward import score_completions
from jacrl.tasks import conversion
from jacrl.tasks.build import build_tasks
from jacrl.tasks.record import read_conversion, read_tasks

SIDECARS = ROOT / "drivers" / "python"


@pytest.fixture(scope="module")
def committed():
    """The committed hole-fill tasks as {prompt, answer}, and their conversion build."""
    return [
        {"prompt": t["prompt"], "answer": t["answer"]}
        for t in read_tasks(ROOT / "data" / "tasks.jsonl")
    ]


@pytest.fixture(scope="module")
def built(committed, executor):
    return conversion.build(ROOT / "drivers", committed, executor)


def test_every_sidecar_passes_its_behavioural_check(built):
    sidecars = sorted(SIDECARS.glob("*.py"))
    assert built.failures == []
    assert len(built.records) == len(sidecars) >= 60
    fams = Counter(json.loads(r["answer"])["family"] for r in built.records)
    assert set(fams) == {"lib", "syn", "text", "err", "arch"}
    assert min(fams.values()) >= 10


def test_sidecars_are_python_for_a_whole_body_hole(committed):
    """Each sidecar parses as Python (Jac's braces and semicolons would not) and belongs to a
    task with a whole-body hole."""
    units = {json.loads(t["answer"])["id"]: json.loads(t["answer"])["unit"] for t in committed}
    for p in sorted(SIDECARS.glob("*.py")):
        s = conversion.parse_sidecar(p)
        assert s.id in units, p
        assert not (units[s.id]["before"].strip() or units[s.id]["after"].strip()), p
        assert not any(ln.rstrip().endswith(";") for ln in s.text.split("\n")), p


def test_committed_conversion_data_matches_the_sidecars(built):
    on_disk = read_conversion(ROOT / "data")
    assert [{"prompt": t["prompt"], "answer": t["answer"]} for t in on_disk] == built.records


def test_conversion_answer_is_the_hole_fill_answer_and_gold_scores_one(built, committed, executor):
    holefill = {json.loads(t["answer"])["id"]: t["answer"] for t in committed}
    answers = [r["answer"] for r in built.records]
    assert all(a == holefill[json.loads(a)["id"]] for a in answers)
    golds = [f"```jac\n{json.loads(a)['gold']}\n```" for a in answers]
    scores = score_completions(golds, answers, executor=executor)
    assert [s.score for s in scores] == [1.0] * len(answers)


def test_prompt_format_matches_the_earlier_harness(built):
    tid = "syn_harness_collatz_steps"
    rec = next(r for r in built.records if json.loads(r["answer"])["id"] == tid)
    meta = json.loads(rec["answer"])
    python = (SIDECARS / f"{tid}.py").read_text().split("\n\nif __name__")[0]
    view = meta["template"].replace(
        "    __HOLE__\n", "    # TODO: write the equivalent Jac code for this unit's body\n"
    )
    assert view != meta["template"]
    want = (
        "Convert the following Python function to idiomatic Jac. Replace the `# TODO` line "
        "in the Jac file below with the Jac code equivalent to the Python. Return only the "
        "replacement code, in a ```jac code block.\n\n"
        f"```python\n{python.strip()}\n```\n\n```jac\n{view}\n```"
    )
    assert rec["prompt"] == want
    assert rec["prompt"].endswith("\n\n```")  # the template's own trailing newline
    for r in built.records:
        m = json.loads(r["answer"])
        assert "__HOLE__" not in r["prompt"] and "if __name__" not in r["prompt"]
        assert m["gold"] not in r["prompt"]
        assert r["prompt"].count(conversion.TODO_LINE) == 1


def test_tasks_for_follows_the_ids_and_skips_ids_without_a_sidecar():
    ids = ["osp_nope", "syn_harness_collatz_steps", "lib_harness_clamp_partial", "lib_parking_fee"]
    got = [t["meta"]["id"] for t in conversion.tasks_for(ids, ROOT / "data")]
    assert got == ["syn_harness_collatz_steps", "lib_parking_fee"]


def _harness(tmp_path: Path) -> Path:
    drivers = tmp_path / "drivers"
    (drivers / "python").mkdir(parents=True)
    for p in HARNESS:
        shutil.copy(p, drivers)
    return drivers


WRONG = {  # id -> (sidecar text, line the failure names, reason)
    "syn_harness_collatz_steps": (
        "def collatz_steps(n):\n    steps = 0\n    while n > 1:\n        n = n // 2\n"
        '        steps += 1\n    return steps\n\n\nif __name__ == "__main__":\n'
        '    for n in [1, 2, 3, 6, 7, 27]:\n        print(f"{n} -> {collatz_steps(n)}")\n',
        9,
        "stdout differs from the driver's at output line 3: expected '3 -> 7', got '3 -> 1'",
    ),
    "text_harness_json_braces": (
        "def render(fields):\n    keys = sorted(fields)\n    return fields[keys[0]]\n\n\n"
        'if __name__ == "__main__":\n    print(render({}))\n',
        3,
        "sidecar does not run clean (runtime_error): IndexError: list index out of range",
    ),
    "err_harness_match_kind": (
        "def classify(value):\n    match value\n        case 0:\n            return 'zero'\n",
        2,
        "Python syntax error: expected ':'",
    ),
    "lib_harness_clamp_partial": (
        'def normalize_scores(xs):\n    return xs\n\n\nif __name__ == "__main__":\n    print(1)\n',
        1,
        "the hole of lib_harness_clamp_partial is part of a body; a sidecar needs a whole-body "
        "hole",
    ),
    "syn_no_such_driver": (
        'def f():\n    return 1\n\n\nif __name__ == "__main__":\n    print(f())\n',
        1,
        "no driver syn_no_such_driver.jac beside the python/ folder",
    ),
}


def test_wrong_sidecars_fail_the_build_with_file_line(tmp_path):
    drivers = _harness(tmp_path)
    good = "arch_harness_account_deposit"
    assert (drivers / f"{good}.jac").exists()
    shutil.copy(SIDECARS / f"{good}.py", drivers / "python")
    for tid, (text, _, _) in WRONG.items():
        (drivers / "python" / f"{tid}.py").write_text(text)
    out = tmp_path / "data"
    report = build_tasks(drivers, out)
    want = sorted(
        f"{drivers / 'python' / tid}.py:{line}: {why}" for tid, (_, line, why) in WRONG.items()
    )
    assert sorted(report.failures) == want
    assert not out.exists() or not any(out.iterdir())
    # --keep-going writes the hole-fill tasks and the conversion tasks whose sidecar passed
    report = build_tasks(drivers, out, keep_going=True)
    assert sorted(report.failures) == want
    assert [t["meta"]["id"] for t in read_conversion(out)] == [good]
    assert len(read_tasks(out / "tasks.jsonl")) == len(HARNESS)


def test_a_folder_without_sidecars_writes_an_empty_conversion_file(tmp_path):
    drivers = _harness(tmp_path)
    shutil.rmtree(drivers / "python")
    for p in drivers.glob("*.jac"):
        if "collatz" not in p.name:
            p.unlink()
    out = tmp_path / "data"
    (out).mkdir()
    (out / conversion.FILE).write_text("stale\n")
    report = build_tasks(drivers, out)
    assert report.failures == []
    assert (out / conversion.FILE).read_text() == ""
