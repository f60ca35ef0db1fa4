"""transformers' index of its model modules, kept on disk.

`import transformers`, and again `transformers.models`, scans every file under
transformers/models/ with regular expressions to build its lazy import table: ~0.8 s of CPU each
time, 1.3-1.6 s in every process that loads a tokenizer (each notebook kernel, each ladder cell,
each CLI call that loads a model). The table is a function of those files alone, so it is kept in
the user's cache, keyed by every file's path, size and mtime: a changed, added or removed file is
a new key. Any failure to read or write it means the scan, as before: slower, never different.

Owns: a hook (`import_hooks`), installed by `import jacrl`, that acts on
`transformers.utils.import_utils` only (after its own code ran, its `define_import_structure` is
wrapped). Raises nothing: a transformers without that function is left as it is."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import tempfile

from jacrl import import_hooks

TARGET = "transformers.utils.import_utils"
FORMAT = 1  # bump when the file's layout changes


def cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "jacrl", "transformers-index")


@functools.cache
def _files_digest(folder: str) -> str:
    """A digest of every .py file under folder (path, size, mtime); once per process: both of
    transformers' tables are of the same folder."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        rel = root[len(folder) :]
        for f in sorted(files):
            if f.endswith(".py"):
                st = os.stat(os.path.join(root, f))
                h.update(f"{rel}/{f} {st.st_size} {st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _key(folder: str, prefix: str | None) -> str:
    """The table's file name: the format, the folder, its files' digest and the prefix."""
    text = f"{FORMAT}\n{folder}\n{_files_digest(folder)}\n{prefix}\n"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _dump(table: dict) -> str:
    """{frozenset(backends): {module: set(names)}} as JSON (keys and names sorted)."""
    return json.dumps(
        [
            [sorted(backends), {m: sorted(names) for m, names in mods.items()}]
            for backends, mods in table.items()
        ]
    )


def _load(text: str) -> dict:
    return {
        frozenset(backends): {m: set(names) for m, names in mods.items()}
        for backends, mods in json.loads(text)
    }


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)  # whole or not at all: a reader never sees half a table
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def kept(scan):
    """scan (transformers' define_import_structure) with its result kept on disk."""

    @functools.lru_cache
    def define_import_structure(module_path, prefix=None):
        try:
            folder = os.path.realpath(os.fspath(module_path))
            folder = os.path.dirname(folder) if os.path.isfile(folder) else folder
            path = os.path.join(cache_dir(), _key(folder, prefix) + ".json")
        except (OSError, TypeError, ValueError):
            return scan(module_path, prefix)
        with contextlib.suppress(OSError, ValueError, TypeError):
            with open(path) as f:
                return _load(f.read())
        table = scan(module_path, prefix)
        with contextlib.suppress(OSError, TypeError, ValueError):
            _write(path, _dump(table))
        return table

    define_import_structure.__wrapped__ = scan
    return define_import_structure


def _keep_the_scan(run, module) -> None:
    """transformers.utils.import_utils runs, then its define_import_structure is wrapped, before
    transformers' own __init__ (and models/__init__) call it."""
    run(module)
    scan = getattr(module, "define_import_structure", None)
    if callable(scan):
        module.define_import_structure = kept(scan)


def install() -> None:
    import_hooks.around_import(TARGET, _keep_the_scan)
