"""What a result depends on, as hashes: files and model/adapter dirs, task data, the code, the
git commit and the library versions. `provenance(...)` is the record every eval row carries;
`code_of(roots)` is part of every artifact's and ladder cell's key (the code they import,
`jacrl.code_graph`); `rebuild_verdict` / `rows_verdict` tell a rebuilt adapter that differs by
training noise from one whose inputs changed.
"""

from __future__ import annotations

import ast
import datetime as _dt
import hashlib
import json
import os
import platform
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from jacrl.code_graph import imported_sources, modules
from jacrl.project import ProjectNotFound, find_root

PACKAGE = Path(__file__).resolve().parent


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


_FILE_HASHES: dict[tuple, str] = {}


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes; cached by (path, size, mtime)."""
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _FILE_HASHES:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _FILE_HASHES[key] = h.hexdigest()
    return _FILE_HASHES[key]


def dir_hashes(
    path: str | os.PathLike, skip_suffixes: tuple[str, ...] = (".md",)
) -> dict[str, str]:
    """{relative path: sha256} of every regular file under a model/adapter dir (docs skipped)."""
    root = Path(path)
    return {
        p.relative_to(root).as_posix(): file_sha256(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(".") and p.suffix not in skip_suffixes
    }


def dir_hash(path: str | os.PathLike) -> str:
    return sha256_bytes(json.dumps(dir_hashes(path), sort_keys=True).encode())


# What `jacrl.models.registry.load(base, adapter_path=dir)` reads: the adapter's weights and shape.
# The rest of an artifact dir (manifest.json, metrics.jsonl, COMPLETE) records when and how fast it
# was built, so its whole-dir hash (`adapter_hash`) differs on every rebuild.
ADAPTER_FILES = ("adapter_config.json", "adapters.safetensors")


def adapter_weights_hash(adapter: str | os.PathLike | None) -> str:
    """sha256 over ADAPTER_FILES' names and bytes: equal for two builds that would load as the
    same model, whenever they were built; "" for no adapter or a dir lacking one of the files."""
    if not adapter:
        return ""
    root = Path(adapter)
    files = [root / name for name in ADAPTER_FILES]
    if not all(f.is_file() for f in files):
        return ""
    return sha256_bytes(json.dumps({f.name: file_sha256(f) for f in files}).encode())


def data_hash(tasks: Iterable[dict]) -> str:
    """Hash of task records (prompt + answer only, in order)."""
    return sha256_bytes(json.dumps([[t["prompt"], t["answer"]] for t in tasks]).encode())


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                node.body = body[1:]
    return tree


_CODE_HASHES: dict[str, str] = {}  # sha256 of the source -> code hash


def code_hash(path: Path) -> str:
    """sha256 of a Python file's syntax tree without docstrings (no line numbers, no comments),
    so editing a comment, a docstring or the layout leaves it unchanged; cached by the file's
    bytes. The tree's dump is Python's own format: another Python minor version may hash the
    same source differently."""
    source = path.read_bytes()
    key = sha256_bytes(source)
    if key not in _CODE_HASHES:
        tree = _strip_docstrings(ast.parse(source, filename=str(path)))
        _CODE_HASHES[key] = sha256_bytes(ast.dump(tree).encode())
    return _CODE_HASHES[key]


def now() -> str:
    """The UTC time to the second: how rows, status files and records are stamped."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def code_of(roots: Iterable[str], package: Path | None = None) -> str:
    """sha256 over the code `roots` run: each file of `code_graph.imported_sources` (the roots
    and every jacrl module they import, transitively, but the `UNKEYED` ones), its path in the
    package and its `code_hash`. An artifact's key holds its trainer's, a cell's its runner's
    and its stages'; comments and docstrings do not count, and a module nothing of theirs
    imports (a new trainer, the CLI) re-keys nothing."""
    package = package or PACKAGE
    h = hashlib.sha256()
    for p in imported_sources(roots, package):
        h.update(p.relative_to(package).as_posix().encode() + b"\0" + code_hash(p).encode() + b"\0")
    return h.hexdigest()


def code_version(package: Path | None = None) -> str:
    """A row's record of the code it was made with: `code_of` every module of the package."""
    package = package or PACKAGE
    return code_of(list(modules(package)), package)


def git_commit(repo: Path | None = None) -> str:
    """HEAD's commit, read from .git files (no git process); "" outside a checkout. repo: the
    project's root (else the checkout this package was imported from)."""
    if repo is None:
        try:
            repo = find_root()
        except ProjectNotFound:
            repo = PACKAGE.parent
    git = repo / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head[5:]
        f = git / ref
        if f.is_file():
            return f.read_text().strip()
        packed = git / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                if line.endswith(" " + ref):
                    return line.split()[0]
    except OSError:
        pass
    return ""


def versions(*extra: str) -> dict[str, str]:
    """Python's and the ML stack's versions, then those of `extra` packages ("" for a package
    that is not installed)."""
    out = {"python": platform.python_version()}
    for pkg in ("jaclang", "mlx", "mlx-lm", "mlx-lm-lora", *extra):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = ""
    return out


def provenance(
    model_dir: Path | None, adapter: str | os.PathLike | None, tasks: list[dict]
) -> dict:
    """An eval row's provenance: commit, code, versions, model/adapter/data hashes, BLAS, time.
    adapter_hash covers the whole artifact dir (its build record too); adapter_weights_hash only
    what loads (`adapter_weights_hash`)."""
    return {
        "git_commit": git_commit(),
        "code_version": code_version(),
        **versions(),
        "model_hash": dir_hash(model_dir) if model_dir else "",
        "adapter_hash": dir_hash(adapter) if adapter else "",
        "adapter_weights_hash": adapter_weights_hash(adapter),
        "data_hash": data_hash(tasks),
        "blas": os.environ.get("LD_PRELOAD", ""),
        "time": now(),
    }


def adapter_key(adapter: str | os.PathLike | None) -> str:
    """The content key of the artifact an adapter dir belongs to (its manifest.json), "" for
    none or a dir without one."""
    if not adapter:
        return ""
    m = Path(adapter) / "manifest.json"
    try:
        return json.loads(m.read_text()).get("key", "")
    except (OSError, ValueError):
        return ""


# -------------------------------------------------------------------------------------------
# a rebuilt adapter that differs: training noise or changed inputs
# -------------------------------------------------------------------------------------------

NOISE = "training noise (same inputs)"
CHANGED = "changed inputs"
UNKNOWN = (
    "same inputs, rebuilt (the row predates adapter_weights_hash: whether its weights "
    "differ cannot be told)"
)


# an artifact's key_parts (`jacrl.train.artifacts.key_parts`), as the inputs a reader can name
INPUT_PARTS = {"data": "data", "base_model": "base model", "hyperparameters": "stage config"}


def artifact_inputs(parts: dict) -> dict:
    """The inputs an artifact's key is made of, one digest each, from its manifest's `key_parts`:
    the code of its stage's trainer (`code of <stage>`), its data, base model, stage config and
    parent's key, and the rest (its condition label, system prompt, ...) as `other`. Ladder rows
    record them per stage (`ladder.artifact_inputs`), so a verdict names what changed."""
    out = {f"code of {parts.get('stage', '?')}": parts.get("code_version") or ""}
    out |= {name: _digest(parts.get(part)) for part, name in INPUT_PARTS.items()}
    out["parent"] = parts.get("parent") or ""
    rest = set(parts) - set(INPUT_PARTS) - {"stage", "code_version", "parent"}
    out["other"] = _digest({k: parts[k] for k in sorted(rest)})
    return out


def _digest(value) -> str:
    return sha256_bytes(json.dumps(value, sort_keys=True).encode())[:16]


def _identity(row: dict) -> dict:
    """What a row records of the adapter it was evaluated with (its `inputs`: those of the stage
    whose artifact it is, when the row records them)."""
    prov = row.get("provenance") or {}
    lad = row.get("ladder") or {}
    keys = lad.get("artifact_keys") or {}
    stage = next((s for s, k in keys.items() if k and k == row.get("artifact")), None)
    return {
        "key": row.get("artifact") or "",
        "weights": prov.get("adapter_weights_hash") or "",
        "dir": prov.get("adapter_hash") or "",
        "code": prov.get("code_version") or "",
        "model": prov.get("model_hash") or "",
        "inputs": (lad.get("artifact_inputs") or {}).get(stage) or {},
    }


def _disk_identity(adapter_dir: Path) -> dict | None:
    """The same record for an artifact dir on disk (from its manifest); None when there is none."""
    try:
        m = json.loads((adapter_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    parts = m.get("key_parts") or {}
    files = parts.get("base_model") or (m.get("base_model") or {}).get("files")
    return {
        "key": m.get("key") or "",
        "weights": adapter_weights_hash(adapter_dir),
        "dir": dir_hash(adapter_dir),
        "code": parts.get("code_version") or "",
        "model": sha256_bytes(json.dumps(files, sort_keys=True).encode()) if files else "",
        "inputs": artifact_inputs(parts) if parts else {},
    }


def _differing(was: dict, now: dict) -> list[str]:
    """What differs between two adapters' records: each input of their artifacts' keys when both
    record them (`artifact_inputs`), else the code and base model hashes both records have."""
    if was["inputs"] and now["inputs"]:
        names = dict.fromkeys([*now["inputs"], *was["inputs"]])
        return [n for n in names if was["inputs"].get(n) != now["inputs"].get(n)]
    pairs = (("code", "code"), ("base model", "model"))
    return [name for name, k in pairs if was[k] and now[k] and was[k] != now[k]]


def _verdict(was: dict, now: dict) -> str:
    if was["key"] and now["key"] and was["key"] != now["key"]:
        what = _differing(was, now)
        return (
            f"{CHANGED} (artifact key {was['key'][:16]} -> {now['key'][:16]}"
            + "".join(f"; {w} differs" for w in what)
            + ")"
        )
    if was["weights"] and now["weights"]:
        return "" if was["weights"] == now["weights"] else NOISE
    if was["dir"] and was["dir"] == now["dir"]:
        return ""
    if was["key"] and was["key"] == now["key"]:
        return UNKNOWN
    return "adapter changed (no artifact key to tell noise from changed inputs)"


def rebuild_verdict(row: dict, adapter_dir: str | os.PathLike) -> str:
    """Whether the artifact at `adapter_dir` (the row's own, or a rebuild of the same cell) holds
    the adapter the row was evaluated with: "" when it does (same weights, whatever the build
    record says); `NOISE` when it is the same artifact key (same data, hyperparameters, code, base
    model and parent) with other weights; `CHANGED` (with the two keys and what differs: with a
    ladder row's `artifact_inputs`, each input by name, "code of grpo differs", "data differs",
    "stage config differs", ...; else "code" / "base model" as the records tell) when the key
    differs; `UNKNOWN` for a same-key
    rebuild when the row predates adapter_weights_hash; "adapter missing" without a manifest."""
    now = _disk_identity(Path(adapter_dir))
    if now is None:
        return "adapter missing"
    return _verdict(_identity(row), now)


def rows_verdict(row: dict, other: dict) -> str:
    """`rebuild_verdict` between two rows of one cell (e.g. the committed row and a fresh rerun's):
    "" for the same adapter, `NOISE`, `CHANGED (...)`, or `UNKNOWN` when either row lacks
    adapter_weights_hash; "" also when neither row has an adapter."""
    was, now = _identity(row), _identity(other)
    if not (was["key"] or was["dir"] or now["key"] or now["dir"]):
        return ""
    if (
        not (was["weights"] and now["weights"])
        and was["key"] == now["key"]
        and was["dir"] != now["dir"]
    ):
        return UNKNOWN
    return _verdict(was, now)
