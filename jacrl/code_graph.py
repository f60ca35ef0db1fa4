"""The code a module runs, read from its source: every jacrl module it imports, transitively,
lazy (function-level) imports included, found with `ast` without importing anything. What an
artifact's or a cell's key holds as its code (`jacrl.provenance.code_of`), so a module a result's
code imports counts without being listed anywhere; `UNKEYED` names the few that decide no result.

How an import statement names a module: import jacrl.a.b names jacrl.a.b; from jacrl.a import
x names jacrl.a.x when that is a module, else jacrl.a, and when jacrl.a is a package the module
its __init__ imports x from (a re-export is followed to its source, so importing one name from a
package does not count its siblings); relative imports are resolved the same way. A package
named as a whole (`from jacrl import report`) counts its __init__ and all it imports.
"""

from __future__ import annotations

import ast
import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent

# Modules a key never holds, although keyed code imports them: each decides no result, or
# reaches every key as values rather than as code. Their imports are not followed either (code
# reached only through them serves them). tests/test_code_graph.py checks each exists.
UNKEYED = {
    # where things are kept, never what they hold (a moved data dir keeps every key)
    "jacrl.project": "paths",
    # how a JSON line is written, locked, fsynced and read back
    "jacrl.jsonl": "file I/O",
    # which stack frame a warning names
    "jacrl.callers": "warnings",
    # the hashes themselves: a change that matters changes the keys it computes; the rest
    # (rebuild verdicts, a row's provenance record) reads results, it makes none
    "jacrl.provenance": "the key's own hashing",
    # every knob's default and resolution: each key holds every config it reads whole, as
    # values, so a changed default re-keys what reads it and a new config class re-keys nothing
    "jacrl.config": "values in the key",
    # the stage table and the conditions: a key holds its condition, its stages' resolved
    # configs by name and the code of the trainers they name (its roots), so adding a stage or
    # a condition re-keys no existing cell or artifact
    "jacrl.stages": "values in the key",
    "jacrl.conditions": "values in the key",
    # the report reads rows that are already made
    "jacrl.report": "reads results",
    # which cells the compute-smart recipe runs, never what a cell's rows hold (a cell the
    # recipe plans has the grid's key: tests/test_recipe_run.py)
    "jacrl.recipe": "picks cells",
    # progress display and experiment tracking (wandb, swanlab, metrics.jsonl): a keyword of
    # every stage, never a knob
    "jacrl.train.tracking": "progress display",
}

# Packages whose every file counts once one of them is imported: the executor's worker scripts
# run in other processes, so no import statement reaches them.
WHOLE_PACKAGES = ("jacrl.executor",)

_PARSED: dict[str, tuple] = {}  # sha256 of a source -> its import statements


def _statements(path: Path) -> tuple[tuple[str, int, tuple[tuple[str, str], ...]], ...]:
    """Every import statement in a file, lazy ones included, as (module, level, ((name, bound
    as), ...)); `import a.b` is ("a.b", -1, ()). Cached by the file's bytes."""
    source = path.read_bytes()
    key = hashlib.sha256(source).hexdigest()
    if key not in _PARSED:
        out = []
        for node in ast.walk(ast.parse(source, filename=str(path))):
            if isinstance(node, ast.Import):
                out += [(a.name, -1, ()) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = tuple((a.name, a.asname or a.name) for a in node.names)
                out.append((node.module or "", node.level, names))
        _PARSED[key] = tuple(out)
    return _PARSED[key]


def modules(package: Path | None = None) -> dict[str, Path]:
    """{dotted name: source} of every module of the package (a package: its __init__.py), read
    from the folder now."""
    package = package or PACKAGE
    out = {}
    for folder, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        rel = Path(folder).relative_to(package).parts
        for f in sorted(files):
            if f.endswith(".py"):
                stem = f[:-3]
                out[".".join(["jacrl", *rel, *([] if stem == "__init__" else [stem])])] = (
                    Path(folder) / f
                )
    return out


def _absolute(module: str, level: int, importer: str, is_package: bool) -> str:
    """A relative import's module, absolute: from the importer's package, `level` - 1 up."""
    if level <= 0:
        return module
    base = importer if is_package else importer.rpartition(".")[0]
    for _ in range(level - 1):
        base = base.rpartition(".")[0]
    return f"{base}.{module}" if module else base


def _origin(module: str, name: str, files: dict[str, Path], depth: int = 0) -> str:
    """The module `from module import name` runs: the submodule module.name, else module, or for
    a package the module its __init__ imports `name` from (followed while it is re-exported)."""
    if name != "*" and f"{module}.{name}" in files:
        return f"{module}.{name}"
    init = files.get(module)
    if init is None or init.name != "__init__.py" or name == "*" or depth > 20:
        return module
    for source, level, names in _statements(init):
        for orig, bound in names:
            if bound == name and level >= 0:
                return _origin(_absolute(source, level, module, True), orig, files, depth + 1)
    return module  # defined in the __init__ itself


def _named(importer: str, path: Path, files: dict[str, Path]) -> set[str]:
    """The jacrl modules one file's import statements name."""
    out = set()
    for module, level, names in _statements(path):
        module = _absolute(module, level, importer, path.name == "__init__.py")
        if module.split(".")[0] != "jacrl":
            continue
        out |= {module} if level < 0 else {_origin(module, n, files) for n, _ in names}
    return out


def _within(name: str, prefixes: Iterable[str]) -> str | None:
    return next((p for p in prefixes if name == p or name.startswith(p + ".")), None)


def imported_sources(roots: Iterable[str], package: Path | None = None) -> list[Path]:
    """The source files of `roots` (dotted jacrl module names) and of every jacrl module they
    import, transitively, sorted; `UNKEYED` modules are left out and not followed, a module of
    `WHOLE_PACKAGES` counts its package's every file. A root, or a module a file imports, that
    does not exist is an error naming it (and the importing file)."""
    package = package or PACKAGE
    files = modules(package)
    seen: set[str] = set()
    todo = [(name, "roots") for name in roots]
    while todo:
        name, by = todo.pop()
        if name in seen or _within(name, UNKEYED):
            continue
        if name not in files:
            raise ModuleNotFoundError(f"{by}: imports {name}, no such module under {package}")
        whole = _within(name, WHOLE_PACKAGES)
        found = [m for m in files if _within(m, [whole])] if whole else [name]
        for m in found:
            seen.add(m)
            todo += [(d, str(files[m])) for d in _named(m, files[m], files)]
    return sorted(files[m] for m in seen)
