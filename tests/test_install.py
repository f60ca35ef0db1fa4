"""The installed package: a NON-editable wheel in a fresh venv, run from a directory outside any
project, works against the project given by --root / JACRL_ROOT or found from the working
directory, resolves jac-tiny through that project's registry, and says in one line when there is
no project.

Offline and fast: the wheel is built from the package's own files with this venv's setuptools (no
build isolation, no index); the fresh venv gets this venv's dependencies as hard links (copies
across filesystems) in its own site-packages, without this checkout's editable finder, so the
sandbox sees them there as it would after a real `pip install .`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT

SITE = Path(sysconfig.get_paths()["purelib"])  # this venv's site-packages


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:  # another filesystem
        shutil.copy2(src, dst)


def _not_ours(directory: str, names: list[str]) -> list[str]:
    """This checkout's editable install (its finder, .pth and metadata) stays out."""
    if Path(directory) != SITE:
        return []
    return [n for n in names if n.startswith(("__editable__", "jacrl"))]


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("install")
    src = base / "src"  # what the wheel is built from: the package's files, nothing else
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src)
    shutil.copytree(ROOT / "jacrl", src / "jacrl", ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    build = subprocess.run(
        [
            *pip,
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(base / "wheel"),
            str(src),
        ],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr + "\n(needs setuptools: pip install -e '.[dev]')"
    wheel = next((base / "wheel").glob("jacrl-*.whl"))

    env_dir = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True)
    py = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    shutil.copytree(
        SITE, site, ignore=_not_ours, copy_function=_link_or_copy, symlinks=True, dirs_exist_ok=True
    )
    subprocess.run(
        [*pip, "--python", str(py), "install", "--no-deps", "--no-index", str(wheel)], check=True
    )
    elsewhere = base / "elsewhere"  # no jacrl.toml here or above
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "JACRL_ROOT"}
    return {
        "wheel": wheel,
        "dir": env_dir,
        "py": py,
        "jacrl": env_dir / "bin" / "jacrl",
        "cwd": elsewhere.resolve(),
        "env": env,
    }


def jacrl(venv, *argv: str, stdin: str = "", cwd=None, env=None):
    return subprocess.run(
        [str(venv["jacrl"]), *argv],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=cwd or venv["cwd"],
        env=env or venv["env"],
        timeout=600,
    )


def test_the_wheel_holds_the_whole_package(venv):
    names = set(zipfile.ZipFile(venv["wheel"]).namelist())
    need = {
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "jacrl").rglob("*")  # data too
        if p.is_file() and "__pycache__" not in p.parts
    }
    assert {"jacrl/executor/server.py", "jacrl/executor/child.py"} <= need <= names, sorted(
        need - names
    )
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "jacrl = jacrl.cli:main" in zipfile.ZipFile(venv["wheel"]).read(entry).decode()
    where = subprocess.run(
        [venv["py"], "-c", "import jacrl; print(jacrl.__file__)"],
        capture_output=True,
        text=True,
        cwd=venv["cwd"],
        check=True,
    ).stdout
    assert Path(where.strip()).is_relative_to(venv["dir"])  # not this checkout's editable finder


def test_version_and_rung_from_anywhere(venv):
    want = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    r = jacrl(venv, "--version")
    assert (r.returncode, r.stdout) == (0, f"jacrl {want}\n"), r.stderr
    first = json.loads(
        json.loads((ROOT / "data/splits/trainpool.jsonl").open().readline())["answer"]
    )["id"]
    for how in (
        dict(argv=("--root", str(ROOT))),  # the flag
        dict(env={**venv["env"], "JACRL_ROOT": str(ROOT)}),  # the variable
        dict(cwd=ROOT / "notebooks"),
    ):  # found above the working directory
        r = jacrl(venv, *how.get("argv", ()), "rung", "1", cwd=how.get("cwd"), env=how.get("env"))
        assert r.returncode == 0 and r.stdout.split()[0] == first, (how, r.stderr)


def test_no_project_is_one_line(venv):
    line = (
        "not inside a jacrl project: no jacrl.toml in {} or above; pass --root or set JACRL_ROOT"
    ).format(venv["cwd"])
    for argv in (
        ("rung", "1"),
        ("score", "some_id", "-"),
        ("generate", "--model", "jac-tiny", "--prompt", "x"),
    ):
        r = jacrl(venv, *argv)
        assert (r.returncode, r.stderr) == (2, f"jacrl: {argv[0]}: {line}\n"), r.stderr
        assert r.stdout == ""
    assert not any(venv["cwd"].iterdir())  # nothing written here


def test_score_and_generate_against_the_project(venv):
    task = next(t for t in map(json.loads, (ROOT / "data" / "tasks.jsonl").open()))
    meta = json.loads(task["answer"])
    r = jacrl(
        venv, "--root", str(ROOT), "score", meta["id"], "-", stdin=f"```jac\n{meta['gold']}\n```\n"
    )
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert (got["id"], got["score"], got["tier"]) == (meta["id"], 1.0, "exact"), got
    # jac-tiny by name, through the project's models/registry.toml; real MLX, one short sample
    r = jacrl(
        venv,
        "--root",
        str(ROOT),
        "generate",
        "--model",
        "jac-tiny",
        "--id",
        meta["id"],
        "-k",
        "1",
        "--max-tokens",
        "16",
    )
    assert r.returncode in (0, 1) and "Traceback" not in r.stderr, r.stderr
    assert (
        "# sample 1 of 1 verified: prints the task's expected output" in r.stderr
        or "# warning: none of 1 samples printed the expected output; showing the first" in r.stderr
    ), r.stderr
