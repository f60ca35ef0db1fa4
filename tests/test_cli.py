"""The `jacrl` command line: every expected mistake is one line `jacrl: <verb>: <message>` on
stderr, exit code 2, and nothing written; --debug gives the traceback; --version; every option's
help shows its default; `ladder run --figures` writes figures. Fast: nothing trains or samples."""

from __future__ import annotations

import argparse
import json
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT

from jacrl import cli, ladder, report
from jacrl.cli import main
from jacrl.cli.ladder import config_from_args
from jacrl.project import project
from jacrl.results import append_cell_rows

POOL = sum(1 for ln in (ROOT / "data" / "splits" / "trainpool.jsonl").open() if ln.strip())
CONDITIONS = "base, sft, sft_rft, star, sft_grpo, sft_grpo_tuned, sft_grpo_lr0, sft_dpo, raw_grpo"
UNKNOWN_MODEL = (
    "unknown model 'nonexistent-model': not a directory and not a name in "
    "models/registry.toml (known: jac-tiny, smollm2-135m)"
)


@pytest.fixture(autouse=True)
def project_env(monkeypatch):
    """The checkout is the project; what `--root` sets in the environment is undone after."""
    monkeypatch.setenv("JACRL_ROOT", str(ROOT))


def fails(capsys, *argv: str) -> str:
    """Run `jacrl argv`; it must exit 2 with exactly one line on stderr: return that line."""
    capsys.readouterr()
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    return err[:-1]


def tree(path: Path) -> dict[str, bytes]:
    """Every file under path with its bytes ({} when path does not exist)."""
    return (
        {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}
        if path.exists()
        else {}
    )


# -------------------------------------------------------------------------------------------
# bad input: one line, exit 2, nothing written
# -------------------------------------------------------------------------------------------


def test_build_tasks_needs_drivers(tmp_path, capsys):
    empty, out = tmp_path / "drivers", tmp_path / "data"
    empty.mkdir()
    assert (
        fails(capsys, "build-tasks", "--drivers", str(empty), "--out", str(out))
        == f"jacrl: build-tasks: {empty}: no .jac drivers in it; nothing to build"
    )
    missing = tmp_path / "nope"
    assert (
        fails(capsys, "build-tasks", "--drivers", str(missing), "--out", str(out))
        == f"jacrl: build-tasks: {missing}: no such drivers folder"
    )
    assert not out.exists()


def test_demo_in_a_project_without_drivers_writes_nothing(tmp_path, capsys):
    proj = tmp_path / "proj"
    (proj / "drivers").mkdir(parents=True)
    (proj / "models").mkdir()
    (proj / "jacrl.toml").write_text("[project]\n")
    (proj / "models" / "registry.toml").write_text(
        f'[models.jac-tiny]\npath = "{ROOT / "models" / "jac-tiny"}"\n'
    )
    assert (
        fails(capsys, "--root", str(proj), "demo", "--model", "jac-tiny")
        == f"jacrl: demo: {proj / 'drivers'}: no .jac drivers in it; nothing to build"
    )
    # the real model's demo, without the model imported: one line naming it, nothing written
    said = fails(capsys, "--root", str(proj), "demo")
    assert said.startswith("jacrl: demo: unknown model 'smollm2-135m'"), said
    assert sorted(p.name for p in proj.iterdir()) == ["drivers", "jacrl.toml", "models"]


def test_show_needs_ladder_rows(tmp_path, capsys):
    res, fig = tmp_path / "results", tmp_path / "fig"
    res.mkdir()
    rows = res / "rl_ladder.jsonl"
    assert (
        fails(capsys, "ladder", "show", "--results", str(res), "--figures", str(fig))
        == f"jacrl: ladder show: {rows}: no rows file (`jacrl ladder run` writes it)"
    )
    for content in ("", '{"tag": "not a ladder row", "tasks": 1}\n'):
        rows.write_text(content)
        assert (
            fails(capsys, "ladder", "show", "--results", str(res), "--figures", str(fig))
            == f"jacrl: ladder show: {rows}: no ladder rows in it"
        )
    assert not fig.exists()
    with pytest.raises(ValueError, match="^no ladder rows to plot$"):  # the library, likewise
        report.write_figures([], fig)
    assert not fig.exists()


def test_rung_must_be_in_the_pool(capsys):
    for bad in ("0", "abc", "-1"):
        assert (
            fails(capsys, "rung", bad)
            == f"jacrl: rung: rung must be a positive integer or 'all', got '{bad}'"
        )
    assert (
        fails(capsys, "rung", str(POOL + 1))
        == f"jacrl: rung: rung {POOL + 1}: the train pool has only {POOL} tasks; choose 1..{POOL} "
        "or 'all'"
    )
    assert main(["rung", str(POOL)]) == 0  # the whole pool is still a rung
    assert len(capsys.readouterr().out.splitlines()) == POOL


def test_ladder_plan_refuses_what_it_cannot_run(tmp_path, capsys):
    res = tmp_path / "results"
    plan = ["ladder", "plan", "--results", str(res)]
    for r in (str(POOL), "999"):  # as large as the pool: 'all' again under another key
        assert (
            fails(capsys, *plan, "--rungs", f"1,{r}")
            == f"jacrl: ladder plan: rung {r}: the train pool has {POOL} tasks, so rung {r} would "
            f"be 'all'; choose 1..{POOL - 1} or 'all'"
        )
    assert (
        fails(capsys, *plan, "--rungs", "abc")
        == "jacrl: ladder plan: rung must be a positive integer or 'all', got 'abc'"
    )
    assert (
        fails(capsys, *plan, "--conditions", "base,bogus")
        == f"jacrl: ladder plan: unknown condition(s) ['bogus']; choose from {CONDITIONS}"
    )
    assert (
        fails(capsys, *plan, "--models", "jac-tiny,nonexistent-model")
        == f"jacrl: ladder plan: {UNKNOWN_MODEL}"
    )
    assert (
        fails(capsys, *plan, "--iters", "abc")
        == "jacrl: ladder plan: iterations: expected N or sft=N,grpo=M, got 'abc'"
    )
    assert (
        fails(capsys, *plan, "-n", "2", "-k", "1,4")
        == "jacrl: ladder plan: pass@k needs 1 <= k <= n samples per task: got k=4 with n=2"
    )
    assert (
        fails(capsys, "ladder", "run", "--results", str(res), "--rungs", "0")
        == "jacrl: ladder run: rung must be a positive integer or 'all', got '0'"
    )
    assert not res.exists()
    # -n alone keeps the default k values that n samples can give
    cfg = config_from_args(cli.build_parser().parse_args(["ladder", "plan", "-n", "2"]))
    assert (cfg.n, cfg.k) == (2, (1, 2))


def test_eval_and_generate_refuse_before_any_work(tmp_path, capsys):
    out = tmp_path / "eval.jsonl"
    ev = ["eval", "--split", "holdout", "--out", str(out)]
    assert (
        fails(capsys, *ev, "-n", "2", "-k", "1,4")
        == "jacrl: eval: pass@k needs 1 <= k <= n samples per task: got k=4 with n=2"
    )
    assert (
        fails(capsys, *ev, "-k", "2")
        == "jacrl: eval: pass@k needs 1 <= k <= n samples per task: got k=2 with n=0"
    )
    assert (
        fails(capsys, *ev, "-n", "2", "-k", "1,x")
        == "jacrl: eval: -k expects comma-separated integers, got '1,x'"
    )
    assert fails(capsys, *ev, "--model", "nonexistent-model") == f"jacrl: eval: {UNKNOWN_MODEL}"
    assert (
        fails(capsys, *ev, "-n", "x")
        == "jacrl: eval: argument -n/--samples: invalid int value: 'x' (see jacrl eval --help)"
    )
    assert not out.exists()
    rows = project().rows  # the ladder's rows are never an eval's output
    before = rows.read_bytes()
    assert (
        fails(capsys, "eval", "--split", "holdout", "--out", str(rows))
        == f"jacrl: eval: --out {rows} is the ladder's own rows file; eval rows go elsewhere "
        "(default: results/eval/eval.jsonl)"
    )
    assert rows.read_bytes() == before
    assert (
        fails(capsys, "generate", "--model", "nonexistent-model", "--prompt", "x")
        == f"jacrl: generate: {UNKNOWN_MODEL}"
    )
    assert (
        fails(
            capsys,
            "generate",
            "--id",
            "no_such_task",
            "--tasks",
            str(ROOT / "data" / "tasks.jsonl"),
        )
        == f"jacrl: generate: {ROOT / 'data' / 'tasks.jsonl'}: no task 'no_such_task'"
    )


def test_eval_rows_go_to_an_ignored_file_by_default():
    from jacrl.cli.evaluate import _eval_out

    assert _eval_out(None) == str(project().eval_rows) == str(ROOT / "results/eval/eval.jsonl")
    assert _eval_out("") == ""  # --out '': no file
    assert "results/eval/" in (ROOT / ".gitignore").read_text().splitlines()


def test_corrupt_jsonl_names_file_and_line(tmp_path, capsys):
    good = (ROOT / "data" / "splits" / "trainpool.jsonl").read_text().splitlines()[0]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(good + "\nnot json\n")
    assert (
        fails(capsys, "score", "x", "-", "--tasks", str(tasks))
        == f"jacrl: score: {tasks}:2: bad task record: Expecting value: line 1 column 1 (char 0)"
    )
    data = tmp_path / "data"
    (data / "splits").mkdir(parents=True)
    for name in ("holdout", "valid"):
        (data / "splits" / f"{name}.jsonl").write_text(good + "\n")
    pool = data / "splits" / "trainpool.jsonl"
    pool.write_text(good + '\n{"prompt": "p"}\n')
    before = tree(data)
    assert (
        fails(capsys, "rung", "1", "--data", str(data))
        == f"jacrl: rung: {pool}:2: bad task record: 'answer'"
    )
    assert (
        fails(capsys, "ladder", "plan", "--data-dir", str(data), "--results", str(tmp_path / "r"))
        == f"jacrl: ladder plan: {pool}:2: bad task record: 'answer'"
    )
    assert (
        fails(capsys, "score", "x", "-", "--tasks", str(tmp_path / "none.jsonl"))
        == f"jacrl: score: {tmp_path / 'none.jsonl'}: no such tasks file (`jacrl build-tasks` "
        "writes data/tasks.jsonl)"
    )
    assert tree(data) == before and not (tmp_path / "r").exists()


def test_run_score_train_and_root_mistakes(tmp_path, capsys):
    missing = tmp_path / "nonexistent.jac"
    assert fails(capsys, "run", str(missing)) == f"jacrl: run: {missing}: No such file or directory"
    assert (
        fails(capsys, "score", "no_such_task", "-")
        == f"jacrl: score: {ROOT / 'data' / 'tasks.jsonl'}: no task 'no_such_task'"
    )
    arts = tmp_path / "artifacts"
    assert (
        fails(capsys, "train", "sft", "--rung", "1", "--out-root", str(arts), "--set", "iters=abc")
        == "jacrl: train: SFTConfig.iters = 'abc': invalid literal for int() with base 10: 'abc'"
    )
    assert fails(
        capsys, "train", "sft", "--rung", "1", "--out-root", str(arts), "--set", "nope=1"
    ).startswith("jacrl: train: SFTConfig has no field 'nope' (fields: ")
    assert (
        fails(capsys, "train", "sft", "--out-root", str(arts))
        == "jacrl: train: give --rung N, --split NAME or --tasks FILE"
    )
    assert not arts.exists()
    assert (
        fails(capsys, "mine", str(tmp_path / "no-tree"))
        == f"jacrl: mine: {tmp_path / 'no-tree'}: no such folder"
    )
    nodata = tmp_path / "nodata"
    assert (
        fails(capsys, "split", "--data", str(nodata))
        == f"jacrl: split: {nodata / 'tasks.jsonl'}: no such tasks file (`jacrl build-tasks` "
        "writes data/tasks.jsonl)"
    )
    assert not nodata.exists()
    assert (
        fails(capsys, "--root", str(tmp_path), "rung", "1")
        == f"jacrl: rung: --root {tmp_path} is not a jacrl project (no jacrl.toml there)"
    )
    assert (
        fails(capsys, "ladder", "plan", "--figures", "x")
        == "jacrl: unrecognized arguments: --figures x (see jacrl --help)"
    )  # plan draws nothing
    assert fails(capsys) == "jacrl: the following arguments are required: VERB (see jacrl --help)"


def test_debug_shows_the_traceback(capsys):
    with pytest.raises(ValueError, match="rung must be a positive integer"):
        main(["--debug", "rung", "abc"])
    assert capsys.readouterr().err == ""


def test_root_sets_the_project_for_the_process(monkeypatch, capsys):
    import os

    monkeypatch.delenv("JACRL_ROOT")
    monkeypatch.chdir("/")  # not inside the project
    assert main(["--root", str(ROOT / "notebooks" / ".."), "rung", "1"]) == 0
    assert os.environ["JACRL_ROOT"] == str(ROOT)  # ladder cells and re-execs inherit it
    first = json.loads((ROOT / "data/splits/trainpool.jsonl").open().readline())["answer"]
    assert capsys.readouterr().out.split()[0] == json.loads(first)["id"]


# -------------------------------------------------------------------------------------------
# conventions
# -------------------------------------------------------------------------------------------


def test_version(capsys):
    want = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"jacrl {want}\n"


def _parsers(p: argparse.ArgumentParser):
    yield p
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub in a.choices.values():
                yield from _parsers(sub)


def test_every_option_has_help_showing_its_default():
    parsers = list(_parsers(cli.build_parser()))
    assert {p.prog for p in parsers} >= {
        "jacrl build-tasks",
        "jacrl split",
        "jacrl score",
        "jacrl run",
        "jacrl generate",
        "jacrl eval",
        "jacrl train",
        "jacrl ladder plan",
        "jacrl ladder run",
        "jacrl ladder show",
        "jacrl demo",
        "jacrl tiny-model",
        "jacrl mine",
        "jacrl rung",
    }
    missing = []
    for p in parsers:
        fmt = p._get_formatter()
        for a in p._actions:
            if isinstance(
                a, (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)
            ):
                continue
            shown = fmt._expand_help(a)
            if not a.help or (a.option_strings and "default" not in shown):
                missing.append(f"{p.prog} {'/'.join(a.option_strings) or a.dest}: {shown!r}")
    assert not missing, missing
    assert "(default: 20.0)" in next(p for p in parsers if p.prog == "jacrl run").format_help()


def test_ladder_run_figures_writes_figures(tmp_path, capsys):
    """`ladder run --figures DIR` (here every cell's rows exist, so nothing runs) writes the
    figures after the run; without --figures none are written."""
    res, fig = tmp_path / "results", tmp_path / "fig"
    argv = ["ladder", "run", "--rungs", "1", "--conditions", "base", "--results", str(res)]
    cell = ladder.plan(config_from_args(cli.build_parser().parse_args(argv)))[0]
    append_cell_rows(
        res / "rl_ladder.jsonl",
        [
            {
                "cell_key": cell.key,
                "model_name": "jac-tiny",
                "rung": "1",
                "condition": "base",
                "kind": kind,
                "tasks": 2,
                "pass1": 1,
                "pass1_pct": 50.0,
                "pass_at_k": {},
                "per_task": [],
            }
            for kind in ("gen", "mem")
        ],
    )
    assert main(argv) == 0
    assert not fig.exists()
    assert main([*argv, "--figures", str(fig)]) == 0
    out = capsys.readouterr().out
    assert f"{cell.name} ({cell.key}): rows exist, skipped" in out
    assert f"wrote {fig / 'ladder.png'}" in out and (fig / "ladder.png").stat().st_size > 1000
