"""The content-addressed artifact store: every training stage's output is one directory.

key = sha256 over {condition, stage, the base model's file hashes, the training data's hash, the
hyperparameters, the code its stage's trainer imports (`jacrl.provenance.code_of`), the parent
artifact's key} (plus a stage's
extras, e.g. the system prompt sampling used). An artifact lives in
`<out_root>/<condition>-<key[:16]>/`: `manifest.json` (the key, its parts and the run's results),
`adapter_config.json` + `adapters.safetensors` (load with
`jacrl.models.registry.load(base, adapter_path=dir)`), `data/` (the exact training records) and
`metrics.jsonl`.

A build runs in a temp dir under a file lock and writes `COMPLETE` last, then moves into place.
An artifact is reused only when its directory has COMPLETE and its manifest's key equals the
computed key, never because a directory of that name exists.

Determinism: the manifest's `weights_hash` (`provenance.adapter_weights_hash`: the adapter's
files only; the dir's other files record when the build ran) and `determinism` (`determinism`:
the level, what it holds for and the BLAS that computed it). Measured on jac-tiny: two builds of
one key at the same OpenBLAS thread count write identical adapter bytes, under load too; another
BLAS (or OpenBLAS kernel family) gives other bytes; whether another thread count does depends on
the kernel family (`THREAD_INVARIANT`).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from jacrl.blas import blas_record
from jacrl.models.registry import resolve
from jacrl.project import path_or
from jacrl.provenance import (
    adapter_weights_hash,
    code_of,
    dir_hashes,
    sha256_bytes,
    versions,
)
from jacrl.stages import STAGES

COMPLETE = "COMPLETE"


@dataclass
class Artifact:
    """A trained adapter on disk: `jacrl.models.registry.load(base_model, adapter_path)`."""

    path: Path
    key: str
    adapter_path: Path
    base_model: Path
    manifest: dict
    reused: bool = False

    @classmethod
    def load(cls, path: str | os.PathLike) -> Artifact:
        path = Path(path)
        if not (path / COMPLETE).is_file():
            raise FileNotFoundError(f"{path} is not a complete artifact (no {COMPLETE} marker)")
        m = json.loads((path / "manifest.json").read_text())
        return cls(path, m["key"], path, Path(m["base_model"]["path"]), m, reused=True)


DETERMINISM = {
    "scope": "a rebuild of this key in a process with the same BLAS library, OpenBLAS kernel "
    "family and thread count (`blas`) writes the same adapter bytes (weights_hash); "
    "`thread_invariant`: whether it does at another thread count too",
    "otherwise": "another BLAS library or kernel family rounds differently and training "
    "amplifies it (jac-tiny, 30 SFT steps, reference BLAS vs OpenBLAS SkylakeX: "
    "every weight differs, max |dw| 0.021 against max |w| 0.088)",
}
# Whether an OpenBLAS kernel family's adapter bytes are the same at any thread count, measured on
# jac-tiny (8 SFT steps, 1 vs 2 and 4 threads, OpenBLAS 0.3.21 on an AMD EPYC with AVX-512):
# SkylakeX and Cooperlake: the same bytes; Haswell (what OPENBLAS_CORETYPE=Haswell forces) and Zen
# (Haswell's kernels): 2 and 4 threads agree, 1 thread gives other bytes. Other families: unknown.
THREAD_INVARIANT = {"SkylakeX": True, "Cooperlake": True, "Haswell": False, "Zen": False}
GRADED_CAVEAT = (
    "the training data or rewards come from sandboxed runs with time-outs (CPU "
    "time, several times the gold run's, with a wall-clock backstop): a run that "
    "crosses one on an overloaded machine changes a reward, and the adapter with it"
)


def determinism(stage: str) -> dict:
    """The manifest's determinism record for a build of `stage` in this process: level
    "bitwise" where the BLAS that ran is known (a Linux CPU: measured there), else "seeded"
    (every generator seeded, bytes not verified), its scope, what breaks it,
    `jacrl.blas.blas_record()` and `thread_invariant` (`THREAD_INVARIANT`; None: not measured)."""
    blas = blas_record()
    rec = {
        "level": "bitwise" if blas["library"] else "seeded",
        **DETERMINISM,
        "blas": blas,
        "thread_invariant": THREAD_INVARIANT.get(blas["openblas_core"]),
    }
    if stage in STAGES and STAGES[stage].grades:  # its data or rewards come from sandboxed runs
        rec["caveat"] = GRADED_CAVEAT
    return rec


def hash_json(obj) -> str:
    """sha256 of obj's canonical JSON (sorted keys)."""
    return sha256_bytes(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode())


def artifact_key(parts: dict) -> str:
    return hash_json(parts)


def key_parts(
    condition: str,
    stage: str,
    base: Path,
    data: dict,
    cfg,
    parent: Artifact | None,
    extra: dict | None = None,
) -> dict:
    """What an artifact's key is computed from (stored in its manifest as `key_parts`)."""
    return {
        "condition": condition,
        "stage": stage,
        "base_model": dir_hashes(base),
        "data": data,
        "hyperparameters": dataclasses.asdict(cfg),
        "code_version": code_of([STAGES[stage].module]),
        "parent": parent.key if parent else None,
        **(extra or {}),
    }


def resolve_base(model, parent: Artifact | None) -> Path:
    """The base model's directory; a parent artifact must have been trained on the same one."""
    base = resolve(model)
    if parent is not None and Path(parent.base_model).resolve() != base:
        raise ValueError(
            f"parent artifact {parent.path} was trained on {parent.base_model}, not {base}"
        )
    return base


def _complete(final: Path, key: str, base: Path) -> Artifact | None:
    """The artifact at `final` when it is complete and has this key."""
    if (final / COMPLETE).is_file():
        try:
            m = json.loads((final / "manifest.json").read_text())
        except (OSError, ValueError):
            return None
        if m.get("key") == key:
            return Artifact(final, key, final, base, m, reused=True)
    return None


def _finish(tmp: Path, manifest: dict) -> None:
    """Write the manifest, then the COMPLETE marker (last, synced)."""
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    with open(tmp / COMPLETE, "w") as f:
        f.write(manifest["key"] + "\n")
        f.flush()
        os.fsync(f.fileno())


def build_artifact(
    condition: str,
    parts: dict,
    base: Path,
    out_root: str | os.PathLike | None,
    build: Callable[[Path], dict],
    log: Callable[[str], None] = print,
) -> Artifact:
    """Reuse `<out_root>/<condition>-<key16>` if complete with the same key; else run
    `build(tmp_dir) -> manifest extras` in a temp dir under a lock, write the manifest, then the
    COMPLETE marker, then move it into place. out_root None: the project's artifacts/."""
    key = artifact_key(parts)
    root = path_or(out_root, "artifacts")
    root.mkdir(parents=True, exist_ok=True)
    name = f"{condition}-{key[:16]}"
    final = root / name
    if (a := _complete(final, key, base)) is not None:
        log(f"reusing {final} (key {key[:16]}, complete)")
        return a
    with open(root / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building the same key
        if (a := _complete(final, key, base)) is not None:
            log(f"reusing {final} (built meanwhile by another process)")
            return a
        for stale in root.glob(f".{name}.tmp-*"):
            shutil.rmtree(stale, ignore_errors=True)  # a killed build: redo it
        tmp = root / f".{name}.tmp-{os.getpid()}"
        tmp.mkdir()
        t0 = time.time()
        try:
            extras = build(tmp)
            manifest = {
                "key": key,
                "condition": condition,
                "name": name,
                "base_model": {"path": str(base), "files": parts["base_model"]},
                "key_parts": parts,
                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "wall_s": round(time.time() - t0, 2),
                "versions": versions(),
                "blas": os.environ.get("LD_PRELOAD", ""),
                "weights_hash": adapter_weights_hash(tmp),
                "determinism": determinism(parts.get("stage", "")),
                **extras,
            }
            _finish(tmp, manifest)
            if final.exists():
                shutil.rmtree(final)  # incomplete or another key's leftovers under the same name
            os.replace(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    log(f"built {final} in {manifest['wall_s']:.1f}s")
    return Artifact(final, key, final, base, manifest, reused=False)
