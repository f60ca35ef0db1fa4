"""Shared fixtures: the real jaclang fork server and the harness drivers (our own, in drivers/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from jacrl.drivers import parse_driver
from jacrl.executor import Executor

ROOT = Path(__file__).resolve().parent.parent
HARNESS = sorted((ROOT / "drivers").glob("*_harness_*.jac"))


@pytest.fixture(scope="session")
def executor():
    with Executor() as ex:
        yield ex


@pytest.fixture(scope="session")
def harness(executor):
    """(driver, answer JSON) for every harness driver, expected output from a real run."""
    from jacrl.tasks import answer_json

    drivers = [parse_driver(p) for p in HARNESS]
    runs = executor.run_many([d.text for d in drivers])
    assert all(v.ran and v.stdout.strip() for v in runs), [v.stderr for v in runs]
    return {d.id: (d, answer_json(d, v.stdout)) for d, v in zip(drivers, runs)}


@pytest.fixture(scope="session")
def harness_tasks(tmp_path_factory):
    """The harness drivers built into real task records ({"prompt", "answer"}) in a temp data dir."""
    import shutil

    from jacrl.build import build_tasks
    from jacrl.tasks import read_tasks

    drivers = tmp_path_factory.mktemp("drivers")
    for p in HARNESS:
        shutil.copy(p, drivers)
    out = tmp_path_factory.mktemp("data")
    report = build_tasks(drivers, out)
    assert not report.failures, report.failures
    return [{"prompt": t["prompt"], "answer": t["answer"]} for t in read_tasks(out / "tasks.jsonl")]


@pytest.fixture(scope="session")
def tiny():
    """The embedded model, committed under models/jac-tiny (JACRL_TEST_MODEL may point elsewhere).
    Missing is a failure, not a skip: the tests exist to run real MLX on it."""
    import os

    from jacrl.models import resolve

    name = os.environ.get("JACRL_TEST_MODEL", "jac-tiny")
    resolve(name)  # raises ModelError with the registry path when it is not there
    return name
