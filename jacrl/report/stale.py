"""Provenance enforced: whether a row still describes what is on disk (its model's files, its
adapter's, the tasks it was graded on, in its task format)."""

from __future__ import annotations

from pathlib import Path

from jacrl.provenance import data_hash, dir_hash
from jacrl.report.rows import format_of


class _Disk:
    """What is on disk now, hashed once per report: model dirs, adapters, tasks by id."""

    def __init__(self):
        self._dirs: dict[str, str | None] = {}
        self._tasks: dict[str, dict[str, dict]] = {}

    def dir_hash(self, path: Path) -> str | None:
        key = str(path)
        if key not in self._dirs:
            self._dirs[key] = dir_hash(path) if path.is_dir() else None
        return self._dirs[key]

    def model_dir(self, row: dict) -> Path | None:
        from jacrl.models import ModelError, resolve
        from jacrl.project import ProjectNotFound, project

        name = str(row.get("model") or row.get("model_name") or "")
        candidates = [name]
        try:
            candidates.append(str(project().root / name))
        except ProjectNotFound:
            pass
        for c in candidates:
            try:
                return resolve(c)
            except (ModelError, ProjectNotFound, OSError):
                continue
        return None

    def tasks(self, fmt: str = "hole") -> dict[str, dict]:
        """The project's tasks of a format by id (conversion: data/conversion.jsonl)."""
        if fmt not in self._tasks:
            from jacrl import conversion
            from jacrl.project import ProjectNotFound, project
            from jacrl.tasks import read_tasks

            try:
                recs = read_tasks(project().tasks) if fmt == "hole" else \
                    conversion.read(project().data)
                self._tasks[fmt] = {t["meta"]["id"]: t for t in recs}
            except (ProjectNotFound, OSError, ValueError):
                self._tasks[fmt] = {}
        return self._tasks[fmt]


def stale_reasons(row: dict, disk: _Disk | None = None) -> list[str]:
    """Why `row` no longer matches the disk: its model's files, its adapter's files (when the
    adapter is there to check) or the tasks it was graded on changed. [] when it matches."""
    disk = disk or _Disk()
    prov = row.get("provenance") or {}
    out = []
    if prov.get("model_hash"):
        mdir = disk.model_dir(row)
        if mdir is None:
            out.append("model missing")
        elif disk.dir_hash(mdir) != prov["model_hash"]:
            out.append("model changed")
    adapter = row.get("adapter")
    if adapter and prov.get("adapter_hash"):
        from jacrl.project import path_or

        apath = Path(adapter) if Path(adapter).is_absolute() else path_or(None, "root") / adapter
        now = disk.dir_hash(apath)
        if now is not None and now != prov["adapter_hash"]:
            out.append("adapter changed")
    ids = [t["id"] for t in row.get("per_task") or []]
    if ids and prov.get("data_hash"):
        tasks = disk.tasks(format_of(row))
        if not all(i in tasks for i in ids):
            out.append("tasks missing")
        elif data_hash([tasks[i] for i in ids]) != prov["data_hash"]:
            out.append("tasks changed")
    return out


def mark_stale(rows: list[dict]) -> list[dict]:
    """The rows, each with `stale` set to its reasons joined ("" when fresh)."""
    disk = _Disk()
    return [{**r, "stale": ", ".join(stale_reasons(r, disk))} for r in rows]
