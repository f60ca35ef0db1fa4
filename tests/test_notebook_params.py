"""Notebooks as safe as the CLI: each notebook, run by papermill the way a user types it from
outside the checkout, refuses a misspelled parameter in one line naming the closest (non-zero
exit, before anything runs) and leaves the checkout's `git status` as it was. The five runs go
in parallel: a kernel start-up each is the cost, shared across the cores."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jacrl import kernel, notebooks, project

ROOT = Path(__file__).resolve().parents[1]
MISSPELT = {
    "00_corpus_mining": ("max_file", "max_files"),
    "10_task_building": ("data_dri", "data_dir"),
    "20_reward_inspection": ("tsk_id", "task_id"),
    "30_training": ("condtion", "condition"),
    "40_ladder_analysis": ("resluts", "results"),
}


def git_status() -> str:
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


@pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs the git checkout"
)
def test_every_notebook_refuses_a_misspelled_parameter_and_writes_nothing(tmp_path):
    kernel.install()  # what `make setup` does: the kernel the notebooks' metadata names
    before = git_status()
    papermill = [sys.executable, "-m", "papermill", "--no-progress-bar"]
    runs = {
        name: subprocess.Popen(
            [
                *papermill,
                str(ROOT / "notebooks" / f"{name}.ipynb"),
                str(tmp_path / f"{name}.ipynb"),
                "-p",
                wrong,
                "x",
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, (wrong, _) in MISSPELT.items()
    }
    for name, proc in runs.items():
        out = proc.communicate(timeout=600)[0]
        wrong, right = MISSPELT[name]
        assert proc.returncode != 0, (name, out[-2000:])
        line = (
            f"unknown {'cell ' if name == '30_training' else ''}parameter {wrong!r} "
            f"(did you mean {right!r}?)"
        )
        assert line in out, (name, out[-2000:])
    assert git_status() == before


def test_check_parameters_reads_the_injected_cell():
    params = 'results = ""  # a comment\nfigures_dir = ""\ninclude_stale = False\n'
    notebooks.check_parameters({"In": ["", params]})  # by hand: nothing injected, nothing checked
    notebooks.check_parameters({"In": ["", params, '# Parameters\nresults = "r"\n', "x = 1"]})
    with pytest.raises(
        TypeError,
        match=r"^unknown parameter 'resluts' \(did you mean "
        r"'results'\?\); known: figures_dir, include_stale, ",
    ):
        notebooks.check_parameters({"In": ["", params, '# Parameters\nresluts = "r"\n']})


def test_results_is_a_folder_or_a_rows_file_and_figures_go_beside_other_rows(tmp_path):
    rows = tmp_path / "run" / project.ROWS_FILE
    rows.parent.mkdir()
    rows.write_text("")
    assert project.rows_path(str(rows.parent)) == rows == project.rows_path(str(rows))
    assert project.figures_for(str(rows.parent), "") == str(rows.parent / "figures")
    assert project.figures_for(str(rows), "") == str(rows.parent / "figures")
    assert project.figures_for("", "") == str(project.project().results / "figures")
    assert project.figures_for(str(rows), "mine") == "mine"
