"""A foreign corpus: drivers written in the earlier harness's format build as they are, their gold
scores 1.0, their prompts are byte-identical to that harness's, our corpus policy only warns about
them (and stays an error on our own drivers/), a partial build writes what passes, and the
pipeline (build -> split -> rung -> eval -> ladder run) runs in another folder without touching
the project's data/.

The drivers in tests/fixtures/foreign are our own, written in that format: a module docstring with
an `Origin:` line (none for the synthetic ones), `sg_`/`gb_`/`graph_` families, ids that differ
from the file name, an instruction with `\\"` and one with bare inner quotes and text after the
last quote."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import ROOT
from tiny_ladder import tiny_ladder_args

from jacrl.cli import main
from jacrl.ruler.drivers import parse_driver, parse_family_map
from jacrl.ruler.reward import score_completions
from jacrl.tasks import corpus
from jacrl.tasks.build import build_tasks
from jacrl.tasks.record import read_tasks
from jacrl.tasks.splits import SplitConfig, check_splits, load_split, make_splits
from jacrl.tasks.validate import load_all

FOREIGN = ROOT / "tests" / "fixtures" / "foreign"
IDS = {
    "gb_sign.jac": "gb_sign_entry",
    "graph_tag_tally.jac": "graph_tag_tally",
    "lib_guest_count.jac": "lib_guest_count",
    "lib_title_case.jac": "lib_title_case",
    "sg_reach.jac": "sg_reach_walk",
    "syn_digit_sum.jac": "syn_digit_root",
    "syn_is_palindrome.jac": "syn_is_palindrome",
    "syn_run_length.jac": "syn_run_length",
}
SENTENCE = (
    "Complete the Jac file below: replace the `# TODO` line with the correct Jac code for "
    "that unit. Return only the replacement code, in a ```jac code block."
)


def earlier_harness_record(text: str, stdout: str) -> tuple[str, dict]:
    """(prompt, answer) built from the raw driver text the way the earlier harness did: the last
    `>>>HOLE` line opens, the last `<<<HOLE` line closes; instruction greedy to the last quote,
    escapes not interpreted; source from `Origin: this_is_jac/...jac`; the prompt view replaces the
    whole marked region by `indent + # TODO: ...`; timeout 20."""
    lines = text.split("\n")
    start = max(i for i, ln in enumerate(lines) if ">>>HOLE" in ln)
    end = max(i for i, ln in enumerate(lines) if "<<<HOLE" in ln and ">>>HOLE" not in ln)
    m = re.search(r'>>>HOLE\s+id="([^"]*)"\s+instruction="(.*)"', lines[start])
    indent = re.match(r"\s*", lines[start]).group(0)
    view = "\n".join(
        lines[:start] + [indent + "# TODO: write the body for this unit"] + lines[end + 1 :]
    )
    prompt = m.group(2) + "\n\n" + SENTENCE + "\n\n" + "```jac" + "\n" + view + "\n" + "```"
    origin = re.search(r"Origin:\s+(this_is_jac/\S+?\.jac)", text)
    return prompt, {
        "id": m.group(1),
        "source": origin.group(1) if origin else "unknown",
        "expected_output": stdout,
        "timeout": 20,
    }


@pytest.fixture(scope="module")
def foreign_data(tmp_path_factory):
    out = tmp_path_factory.mktemp("foreign") / "data"
    report = build_tasks(FOREIGN, out)
    return out, report


def test_earlier_format_drivers_build_with_identical_prompts(foreign_data, executor):
    out, report = foreign_data
    assert report.failures == [] and report.written
    tasks = read_tasks(out / "tasks.jsonl")
    assert [t["meta"]["id"] for t in tasks] == [IDS[f] for f in sorted(IDS)]
    runs = executor.run_many([(FOREIGN / f).read_text() for f in sorted(IDS)])
    for f, t, v in zip(sorted(IDS), tasks, runs, strict=True):
        prompt, answer = earlier_harness_record((FOREIGN / f).read_text(), v.stdout)
        assert t["prompt"] == prompt, f
        # the earlier harness's keys first, equal but the time-out, which is now the task's own
        assert {k: t["meta"][k] for k in list(t["meta"])[:4]} == {**answer, "timeout": 0.5}, f
    by_id = {t["meta"]["id"]: t["meta"] for t in tasks}
    assert '\\"anonymous\\"' in tasks[0]["prompt"].split("\n")[0]  # backslashes kept literally
    assert by_id["syn_run_length"]["family"] == "syn" and by_id["sg_reach_walk"]["family"] == "sg"
    assert by_id["sg_reach_walk"]["source"] == "this_is_jac/littlex/social_graph.jac"
    assert by_id["syn_is_palindrome"]["source"] == "unknown"
    assert sorted(p.name for p in (out / "templates").iterdir()) == sorted(
        f"{i}.jac" for i in IDS.values()
    )


def test_foreign_gold_scores_one_in_every_answer_shape(foreign_data):
    tasks = read_tasks(foreign_data[0] / "tasks.jsonl")
    completions, answers = [], []
    for t in tasks:
        m = t["meta"]
        driver = next(p for p in FOREIGN.glob("*.jac") if f'id="{m["id"]}"' in p.read_text())
        unit = f"{m['unit']['signature']} {{\n{m['gold']}\n}}"
        for c in (
            m["gold"],
            f"```jac\n{m['gold']}\n```",
            f"```jac\n{unit}\n```",
            f"```jac\n{driver.read_text()}\n```",
            f"<answer>\n```jac\n{m['gold']}\n```\n</answer>",
        ):
            completions.append(c)
            answers.append(t["answer"])
    scored = score_completions(completions, answers)
    assert [s.score for s in scored] == [1.0] * len(completions), [
        (s.task_id, s.tier) for s in scored if s.score != 1.0
    ]


def test_policy_warns_on_a_foreign_folder_and_holds_on_ours(foreign_data, tmp_path, monkeypatch):
    # ours: the policy is clean, and a build of drivers/ enforces it
    ours = load_all(ROOT / "drivers")[0]
    assert [p for d in ours for p in corpus.driver_problems(d)] == []
    assert corpus.corpus_problems(ours, ROOT / "drivers") == []
    assert corpus.policy_mode("auto", ROOT / "drivers") == "error"
    assert corpus.policy_mode("auto", FOREIGN) == "warn"
    # foreign: every rule it breaks is a warning, one line each, and the build still writes
    warnings = foreign_data[1].warnings
    for rule in (
        "first line must be '# Source: apps/<app>'",
        "family prefix must be one of",
        "does not match the file name",
        "instruction must not contain double quotes",
        "families (gb, graph, lib, sg, syn); our corpus keeps at least 6",
        "osp drivers are 0/8",
        "source 'unknown' holds 3/8 drivers",
    ):
        assert any(rule in w for w in warnings), rule
    assert (
        f"{FOREIGN / 'sg_reach.jac'}:20: id 'sg_reach_walk' does not match the file name"
        in warnings
    )
    # the same drivers as a project's own drivers/: errors, nothing run, nothing written
    proj = tmp_path / "proj"
    (proj / "drivers").mkdir(parents=True)
    (proj / "jacrl.toml").write_text("")
    shutil.copy(FOREIGN / "sg_reach.jac", proj / "drivers")
    monkeypatch.setenv("JACRL_ROOT", str(proj))
    report = build_tasks()
    assert not report.written and not (proj / "data").exists() and report.built == []
    bad = proj / "drivers" / "sg_reach.jac"
    assert report.failures[:3] == [
        f"{bad}:1: first line must be '# Source: apps/<app>'",
        f"{bad}:20: id 'sg_reach_walk': family prefix must be one of "
        "('osp', 'lib', 'syn', 'arch', 'text', 'err')",
        f"{bad}:20: id 'sg_reach_walk' does not match the file name",
    ]
    assert report.rejected == 1 and report.warnings == []
    assert any(ln.startswith(f"{proj / 'drivers'}: 1 families") for ln in report.failures)


def test_family_map_renames_prefixes(tmp_path):
    fmap = parse_family_map("sg=osp, gb=osp,graph=osp")
    assert fmap == {"sg": "osp", "gb": "osp", "graph": "osp"}
    (tmp_path / "map.txt").write_text("# the earlier corpus's graph families\nsg=osp\ngb=osp\n")
    assert parse_family_map(tmp_path / "map.txt") == {"sg": "osp", "gb": "osp"}
    fams = {d.id: d.family for d in load_all(FOREIGN, fmap)[0]}
    assert fams["sg_reach_walk"] == fams["gb_sign_entry"] == fams["graph_tag_tally"] == "osp"
    assert fams["lib_title_case"] == "lib"
    with pytest.raises(ValueError, match="'sg' is not PREFIX=FAMILY"):
        parse_family_map("sg")


def test_format_edge_cases_parse(tmp_path):
    d = parse_driver(FOREIGN / "syn_is_palindrome.jac")  # text after the last quote is ignored
    assert d.instruction.endswith("not a letter.")
    d = parse_driver(FOREIGN / "syn_run_length.jac")  # bare inner quotes, greedy to the last
    assert 'e.g. "aaab" -> "3a1b"; the empty string stays empty.' in d.instruction
    assert parse_driver(FOREIGN / "gb_sign.jac").instruction.startswith(
        'Return \\"<name> @ <STAMP>: <message>\\" with'
    )


def _tree_hash(path: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(path)).encode() + p.read_bytes())
    return h.hexdigest()


def test_keep_going_writes_what_passes(tmp_path, capsys):
    drivers = tmp_path / "drivers"
    drivers.mkdir()
    for f in ("lib_guest_count.jac", "syn_digit_sum.jac"):
        shutil.copy(FOREIGN / f, drivers)
    crash = (
        (FOREIGN / "syn_digit_sum.jac")
        .read_text()
        .replace('id="syn_digit_root"', 'id="syn_crash"')
        .replace("while n >= 10", "while n / 0 >= 10")
    )
    (drivers / "syn_crash.jac").write_text(crash)
    (drivers / "syn_nomark.jac").write_text(crash.replace(">>>HOLE", ">>HOLE"))
    out = tmp_path / "data"
    (out / "templates").mkdir(parents=True)
    (out / "tasks.jsonl").write_text("old\n")
    before = _tree_hash(out)
    argv = ["build-tasks", "--drivers", str(drivers), "--out", str(out)]
    # all-or-nothing by default: the old output stays as it was
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert _tree_hash(out) == before
    assert (
        f"{drivers / 'syn_crash.jac'}:9: driver does not run clean (runtime_error): "
        "Error: division by zero" in err
    )
    assert f"{drivers / 'syn_nomark.jac'}:1: expected exactly one '>>>HOLE' marker, found 0" in err
    assert "build failed: 2 driver(s) rejected, 2 problem(s), nothing written" in err
    # --keep-going: the two good ones are written, the bad ones reported the same way
    assert main(argv + ["--keep-going"]) == 1
    cap = capsys.readouterr()
    assert f"built 2 tasks -> {out}/tasks.jsonl" in cap.out
    assert "build failed: 2 driver(s) rejected, 2 problem(s), the 2 that passed written" in cap.err
    assert [t["meta"]["id"] for t in read_tasks(out / "tasks.jsonl")] == [
        "lib_guest_count",
        "syn_digit_root",
    ]
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]  # no stage left behind
    assert sorted(p.name for p in (out / "templates").iterdir()) == [
        "lib_guest_count.jac",
        "syn_digit_root.jac",
    ]


def test_foreign_splits_cover_its_families(foreign_data):
    tasks = read_tasks(foreign_data[0] / "tasks.jsonl")
    mapped = [
        dict(t, meta=dict(t["meta"], family="osp"))
        if t["meta"]["family"] in ("sg", "gb", "graph")
        else t
        for t in tasks
    ]
    for ts in (tasks, mapped):
        s = make_splits(ts, SplitConfig(holdout_min=3, valid_n=1))
        assert check_splits(s) == []
        assert {t["meta"]["family"] for t in s.holdout} == {t["meta"]["family"] for t in ts}
        # source-less tasks are no one big source: some are held out, the rest train
        unknown = [t["meta"]["id"] for t in ts if t["meta"]["source"] == "unknown"]
        held = {t["meta"]["id"] for t in s.holdout}
        assert 0 < len(held & set(unknown)) < len(unknown)
        assert "unknown" in s.holdout_sources
    s = make_splits(mapped, SplitConfig(holdout_min=3, valid_n=1))
    assert s.holdout_sources == ["this_is_jac/guestbook.jac", "unknown"]
    assert len(s.trainpool) == 4
    too_big = make_splits(tasks, SplitConfig(holdout_min=3, valid_n=0))
    too_big.trainpool = []
    assert "the train pool is empty" in "; ".join(check_splits(too_big))


def test_pipeline_runs_in_another_folder(foreign_data, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("JACRL_ROOT", str(ROOT))
    data = tmp_path / "data"
    shutil.copytree(foreign_data[0], data)
    ours = _tree_hash(ROOT / "data")
    assert main(["split", "--data", str(data), "--holdout-min", "3", "--valid-n", "1"]) == 0
    assert "self-check: OK" in capsys.readouterr().out
    hold = load_split("holdout", data)
    fams = {json.loads(t["answer"])["family"] for t in read_tasks(data / "tasks.jsonl")}
    assert {json.loads(t["answer"])["family"] for t in hold} == fams
    assert main(["rung", "all", "--data", str(data)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(load_split("trainpool", data))
    res = tmp_path / "eval.jsonl"
    assert (
        main(
            [
                "eval",
                "--split",
                "holdout",
                "--data-dir",
                str(data),
                "--out",
                str(res),
                "--max-tokens",
                "16",
            ]
        )
        == 0
    )
    row = json.loads(res.read_text())
    assert row["tasks"] == len(hold)
    res = tmp_path / "results"
    assert main(["ladder", "run", *tiny_ladder_args(tmp_path, gen_limit=0, data=data)]) == 0
    rows = [json.loads(ln) for ln in (res / "rl_ladder.jsonl").read_text().splitlines()]
    assert sorted(r["kind"] for r in rows) == ["gen", "mem"]
    assert next(r for r in rows if r["kind"] == "gen")["tasks"] == len(hold)
    assert _tree_hash(ROOT / "data") == ours
