"""jaclang's compiled compiler, cached once per interpreter and jaclang install, so that a process
with an empty cache (the sandbox's, a plain `jac run` in a fresh temp dir) does not spend ~1.5 s
of CPU compiling jaclang's own `.jac` modules again at every start.

Only jaclang's own modules are in it, compiled here, unsandboxed, by jaclang itself (`warm.py`
run alone); no model-written program ever writes to it: the sandbox sees it read-only, and a plain
run gets a copy of its own. jaclang checks every entry against its source, so a stale entry is a
miss, never a wrong module. Any failure to build it means no cache: slower, never different.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BUILD_TIMEOUT = 180.0  # importing all of jaclang on a loaded 2-core machine
WARM_SCRIPT = Path(__file__).with_name("warm.py")
SOURCE = "jacrl-source.json"  # what the cache was built from


@functools.cache
def _source() -> dict[str, str]:
    """This interpreter and this jaclang install (its version, folder and the folder's mtime)."""
    spec = importlib.util.find_spec("jaclang")  # finds, does not import
    root = os.path.dirname(spec.origin) if spec and spec.origin else ""
    return {
        "python": os.path.realpath(sys.executable),
        "version": sys.version,
        "jaclang": root,
        "jaclang_version": importlib.metadata.version("jaclang"),
        "mtime": str(os.stat(root).st_mtime_ns) if root else "",
    }


def location() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    key = hashlib.sha256(json.dumps(_source(), sort_keys=True).encode()).hexdigest()[:16]
    return Path(base) / "jacrl" / f"jaclang-{key}"


def _prune(folder: Path) -> None:
    """Caches of jaclang installs that are gone (a test's or a deleted venv), and builds that
    died an hour ago or more."""
    for d in folder.iterdir():
        try:
            if d.name.startswith("jaclang-"):
                gone = not os.path.isdir(json.loads((d / SOURCE).read_text())["jaclang"])
            else:
                gone = d.name.startswith(".building-") and time.time() - d.stat().st_mtime > 3600
        except (OSError, ValueError, KeyError):
            gone = d.name.startswith("jaclang-")  # no readable record: not one of ours, whole
        if gone:
            shutil.rmtree(d, ignore_errors=True)


def jac_cache() -> str | None:
    """The cache folder (what XDG_CACHE_HOME should be), built on first use; None when it cannot
    be built here."""
    try:
        final = location()
        if final.is_dir():
            return str(final)
        final.parent.mkdir(parents=True, exist_ok=True)
        _prune(final.parent)
        tmp = Path(tempfile.mkdtemp(prefix=".building-", dir=final.parent))
        try:
            env = {
                "PATH": os.defpath,
                "LANG": "C.UTF-8",
                "HOME": str(tmp),
                "XDG_CACHE_HOME": str(tmp),
            }
            subprocess.run(
                [sys.executable, "-s", "-B", "-P", str(WARM_SCRIPT)],
                env=env,
                cwd=tmp,
                check=True,
                timeout=BUILD_TIMEOUT,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            (tmp / SOURCE).write_text(json.dumps(_source(), indent=1))
            for d, _, files in os.walk(tmp):  # readable by the sandbox's own uid
                os.chmod(d, 0o755)
                for f in files:
                    os.chmod(os.path.join(d, f), 0o644)
            os.rename(tmp, final)  # whole or not at all; a concurrent builder may have won
        except OSError:
            if not final.is_dir():
                raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return str(final)
    except (
        OSError,
        subprocess.SubprocessError,
        ValueError,
        importlib.metadata.PackageNotFoundError,
    ):
        return None


def private_copy(into: str | os.PathLike) -> str | None:
    """A writable copy of the cache under `into` (for one plain `jac run`), or None."""
    cache = jac_cache()
    if cache is None:
        return None
    dest = os.path.join(into, "jac-cache")
    try:
        shutil.copytree(cache, dest)
    except OSError:
        return None
    return dest
