"""The Makefile finds Python 3.12 where pyenv keeps it: under $PYENV_ROOT when set (pyenv's own
variable), else ~/.pyenv."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(
    shutil.which("make") is None or sys.version_info[:2] != (3, 12),
    reason="needs make and a Python 3.12 to stand in for pyenv's",
)
def test_python312_is_found_under_pyenv_root(tmp_path):
    fake = tmp_path / "pyenv" / "versions" / "3.12.99" / "bin" / "python3.12"
    fake.parent.mkdir(parents=True)
    fake.symlink_to(os.path.realpath(sys.executable))
    (tmp_path / "home").mkdir()  # no ~/.pyenv there
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "PYENV_ROOT": str(tmp_path / "pyenv"),
    }
    if shutil.which("python3.12", path=env["PATH"]):
        pytest.skip("a python3.12 on the system PATH comes first")
    out = subprocess.run(
        ["make", "-s", "--no-print-directory", "--eval", "py312: ; @echo $(PYTHON312)", "py312"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(fake)
