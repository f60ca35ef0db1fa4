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
