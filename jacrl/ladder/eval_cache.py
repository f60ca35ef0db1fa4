"""Evaluations made once: a cell's evaluation whose every input another cell's already had (the
same model files, adapter weights, tasks, evaluation settings and evaluation code) takes that
row and its samples instead of decoding again. A base cell's gen row is the same at every rung
(nothing is trained, the holdout is fixed): a ladder of R rungs evaluated it R times.

The cache is artifacts/evals/<key>/ (row.json and the samples file), written whole (a temporary
folder renamed into place) after the evaluation; a row taken from it says so (`eval_reused`:
the key) and keeps the timings of the evaluation that made it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from jacrl.config import EvalConfig
from jacrl.models.registry import resolve
from jacrl.provenance import (
    adapter_key,
    adapter_weights_hash,
    code_of,
    data_hash,
    dir_hash,
    versions,
)

ROW = "row.json"
EVALS = "evals"  # under the project's artifacts/


def eval_key(
    model: str, adapter, tasks: Sequence[dict], cfg: EvalConfig, kind: str, split: str
) -> str:
    """sha256 of everything an evaluation's row and samples depend on: the model's files, the
    adapter's weights and the artifact it is (a row names its artifact: two artifacts whose
    weights came out equal, as a GRPO run without signal and its parent, keep their own rows), the
    tasks (prompt and answer, in order), every EvalConfig value, the row's kind and split, the
    code `jacrl.evaluate` runs, the versions of Python, jaclang and the MLX stack, and the BLAS
    library preloaded."""
    parts = {
        "model": dir_hash(resolve(model)),
        "adapter": adapter_weights_hash(adapter),
        "artifact": adapter_key(adapter),
        "tasks": data_hash(tasks),
        "eval": dataclasses.asdict(cfg),
        "row": [kind, split],
        "code": code_of(["jacrl.evaluate"]),
        "versions": versions(),
        "blas": os.environ.get("LD_PRELOAD", ""),
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def cached(
    root: Path, key: str, samples: Path, run: Callable[[], dict], tag: str
) -> tuple[dict, bool]:
    """(the row, whether it was reused): root/key's row and samples copied to `samples` (the row
    retagged `tag`), else `run()`'s row (which wrote `samples`), then kept under root/key."""
    entry = root / key
    row = _kept(entry, samples.name)
    if row is not None:
        if row.get("samples"):
            samples.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(entry / samples.name, samples)
            row["samples"] = str(samples)
        return {**row, "tag": tag, "eval_reused": key}, True
    shutil.rmtree(entry, ignore_errors=True)  # an entry missing a part is made again
    row = run()
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{key[:12]}-", dir=root))
    try:
        if row.get("samples") and samples.is_file():
            shutil.copyfile(samples, tmp / samples.name)
        (tmp / ROW).write_text(json.dumps(row, sort_keys=True))
        os.rename(tmp, entry)  # whole or not at all; a concurrent maker's entry wins
    except OSError:
        pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return row, False


def _kept(entry: Path, samples: str) -> dict | None:
    """The entry's row when the entry is whole (its row reads, and the samples file it names is
    there); None otherwise: a reused row never points at samples that are not beside it."""
    try:
        row = json.loads((entry / ROW).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(row, dict) or (row.get("samples") and not (entry / samples).is_file()):
        return None
    return row
