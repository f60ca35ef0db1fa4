"""Two builds of one SFT key on jac-tiny in two processes write the same adapter bytes, the
manifest says so, a build at another OpenBLAS thread count gives what the manifest's
`thread_invariant` says of its kernel family, and `provenance.rebuild_verdict` / `rows_verdict`
tell the same adapter, training noise and changed inputs apart."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys

import pytest

from jacrl import provenance as pv
from jacrl.blas import fast_blas_env
from jacrl.config import SFTConfig
from jacrl.models.registry import resolve
from jacrl.tasks.record import read_tasks
from jacrl.train.artifacts import THREAD_INVARIANT, Artifact

# 8 steps: enough that rounding differences show (reference BLAS and OpenBLAS give other bytes
# here: measured), few enough for ~1 s of training per build with OpenBLAS.
CFG = SFTConfig(
    iters=8,
    learning_rate=2e-4,
    warmup=0,
    batch_size=1,
    lora_layers=-1,
    lora_rank=8,
    grad_checkpoint=True,
    steps_per_report=4,
    steps_per_eval=10**6,
    val_batches=1,
)
BUILD = (
    "import json, sys; from jacrl import train as tr; from jacrl.config import SFTConfig, "
    "from_dict; s = json.load(open(sys.argv[1])); "
    "[print('ARTIFACT', tr.sft(s['model'], [s['task']], None, from_dict(SFTConfig, c), "
    "sys.argv[2], log=lambda m: None).path) for c in s['cfgs']]"
)


@pytest.fixture(scope="module")
def task(data_dir):
    """The train pool's shortest task (prompt + answer): the cheapest to train on."""
    tasks = read_tasks(os.path.join(data_dir, "splits", "trainpool.jsonl"))
    return min(tasks, key=lambda t: len(t["prompt"]) + len(t["answer"]))


def _threads() -> int:
    """The OpenBLAS thread count the CLI and the notebooks train with here."""
    return int(fast_blas_env().get("OPENBLAS_NUM_THREADS", "1"))


def _other_threads() -> int:
    return 1 if _threads() > 1 else 2


def _build(tiny, task, tmp, name: str, seeds: tuple[int, ...], threads: int = 0) -> list:
    """The real `jacrl.train.sft`, once per seed, in one fresh process with OpenBLAS preloaded (as
    the CLI and the ladder's notebooks run it; this process may have started without it), into
    tmp/name."""
    spec = tmp / f"{name}.json"
    cfgs = [dataclasses.asdict(dataclasses.replace(CFG, seed=s)) for s in seeds]
    spec.write_text(json.dumps({"model": tiny, "task": task, "cfgs": cfgs}))
    env = {**os.environ, **fast_blas_env()}
    if threads and "LD_PRELOAD" in env:
        env["OPENBLAS_NUM_THREADS"] = str(threads)
    out = subprocess.run(
        [sys.executable, "-c", BUILD, str(spec), str(tmp / name)],
        env=env,
        check=True,
        timeout=300,
        capture_output=True,
        text=True,
    ).stdout
    # (the trainer prints its progress to stdout too)
    return [
        Artifact.load(line.split(" ", 1)[1])
        for line in out.splitlines()
        if line.startswith("ARTIFACT ")
    ]


@pytest.fixture(scope="module")
def builds(tiny, task, tmp_path_factory):
    """(first, its rebuild in another process, the first's with seed 1, its rebuild at another
    BLAS thread count: 1, or 2 where the first ran at 1)."""
    tmp = tmp_path_factory.mktemp("determinism")
    a, c = _build(tiny, task, tmp, "a", (0, 1))
    (b,) = _build(tiny, task, tmp, "b", (0,))
    (t,) = _build(tiny, task, tmp, "t", (0,), threads=_other_threads())
    return a, b, c, t


def _row(art: Artifact, task: dict) -> dict:
    """What an eval row records of its adapter (the fields `evaluate` fills)."""
    return {
        "artifact": art.key,
        "adapter": str(art.path),
        "provenance": pv.provenance(resolve("jac-tiny"), art.path, [task]),
    }


def _weights(art: Artifact) -> str:
    """The adapter's files as their hash, read from disk (an assertion on the bytes themselves
    would have pytest diff two 100 kB byte strings for minutes)."""
    return pv.adapter_weights_hash(art.path)


def test_rebuild_of_one_key_is_bitwise_identical(builds):
    a, b, c, _ = builds
    assert a.key == b.key and a.path != b.path
    assert _weights(a) == _weights(b)
    assert (
        a.manifest["weights_hash"]
        == b.manifest["weights_hash"]
        == pv.adapter_weights_hash(b.path)
        != ""
    )
    # only the build record differs between the two dirs (when, how fast): what adapter_hash,
    # the whole dir's hash, also covers
    da, db = pv.dir_hashes(a.path), pv.dir_hashes(b.path)
    assert set(da) == set(db) and {k for k in da if da[k] != db[k]} <= {
        "manifest.json",
        "metrics.jsonl",
    }
    # the comparison sees a change: another seed is another key and other bytes
    assert c.key != a.key and _weights(c) != _weights(a)
    assert c.manifest["weights_hash"] != a.manifest["weights_hash"]


def test_manifest_records_the_determinism_level_and_blas(builds):
    a, b, _, t = builds
    for art in (a, b, t):
        d = art.manifest["determinism"]
        assert d["level"] == "bitwise" and "thread" in d["scope"] and "caveat" not in d
        assert d["blas"]["library"]
    if fast_blas_env():  # OpenBLAS: t ran at another thread count
        blas_a, blas_t = (x.manifest["determinism"]["blas"] for x in (a, t))
        assert "openblas" in blas_a["library"] and blas_a["openblas_core"]
        assert (blas_a["threads"], blas_t["threads"]) == (_threads(), _other_threads())
        assert a.manifest["determinism"]["thread_invariant"] == THREAD_INVARIANT.get(
            blas_a["openblas_core"]
        )


@pytest.mark.skipif(not fast_blas_env(), reason="thread counts are OpenBLAS's")
def test_another_thread_count_gives_what_the_manifest_says(builds, task):
    """The same key built at another OpenBLAS thread count: the same bytes where the manifest
    says the kernel family is thread-invariant, other bytes where it says it is not (Haswell's
    kernels: measured), and then the verdict is training noise, never a changed input."""
    a, _, _, t = builds
    assert t.key == a.key
    invariant = a.manifest["determinism"]["thread_invariant"]
    same = _weights(t) == _weights(a) != ""
    if invariant is not None:
        assert same == invariant, a.manifest["determinism"]["blas"]
    assert pv.rebuild_verdict(_row(a, task), t.path) == ("" if same else pv.NOISE)


def test_verdict_tells_same_adapter_noise_and_changed_inputs(builds, task, tmp_path):
    a, b, c, _ = builds
    row = _row(a, task)
    assert row["provenance"]["adapter_weights_hash"] == a.manifest["weights_hash"]
    assert row["provenance"]["adapter_hash"] != pv.dir_hash(b.path)  # the old hash: differs
    assert pv.rebuild_verdict(row, b.path) == ""  # ... the adapter does not
    assert pv.rows_verdict(row, _row(b, task)) == ""
    changed = pv.rebuild_verdict(row, c.path)
    assert changed.startswith(pv.CHANGED) and a.key[:16] in changed and c.key[:16] in changed
    assert pv.rows_verdict(row, _row(c, task)).startswith(pv.CHANGED)
    # the same key with other weights (what a non-deterministic rebuild would leave)
    noisy = tmp_path / b.path.name
    shutil.copytree(b.path, noisy)
    shutil.copy(c.path / "adapters.safetensors", noisy / "adapters.safetensors")
    assert pv.rebuild_verdict(row, noisy) == pv.NOISE
    assert pv.rows_verdict(row, _row(Artifact.load(noisy), task)) == pv.NOISE
    # a row from before adapter_weights_hash: the same key, but the weights cannot be compared
    old = json.loads(json.dumps(row))
    del old["provenance"]["adapter_weights_hash"]
    assert pv.rebuild_verdict(old, b.path) == pv.UNKNOWN
    assert pv.rebuild_verdict(old, a.path) == ""  # its own, untouched dir
    assert pv.rebuild_verdict(row, tmp_path / "nowhere") == "adapter missing"


def test_the_report_keeps_noise_apart_from_stale(builds, task, tmp_path):
    """`ladder show`'s staleness: a row whose adapter folder now holds a same-key rebuild with
    other weights is kept and noted (training noise), one with another key's adapter is stale,
    one whose folder was rebuilt to the same bytes is neither."""
    from jacrl.report.stale import mark_stale

    a, b, c, _ = builds
    rebuilt, noisy, changed = (tmp_path / n for n in ("rebuilt", "noisy", "changed"))
    for dest, weights in ((rebuilt, b), (noisy, c)):
        shutil.copytree(b.path, dest)  # b: the same key as a, built again
        shutil.copy(weights.path / "adapters.safetensors", dest / "adapters.safetensors")
    shutil.copytree(c.path, changed)
    rows = []
    for path in (rebuilt, noisy, changed):
        row = _row(a, task)
        row["adapter"] = str(path)  # recorded: a's folder hash; on disk now: path's files
        row["model"] = "jac-tiny"
        rows.append(row)
    same, noise, other = mark_stale(rows)
    assert (same["stale"], same["rebuilt"]) == ("", "")
    assert (noise["stale"], noise["rebuilt"]) == ("", pv.NOISE)
    assert other["stale"].startswith(f"adapter {pv.CHANGED}") and other["rebuilt"] == ""
