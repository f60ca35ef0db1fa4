"""Provenance enforced: whether a row still describes what is on disk (its model's files, its
adapter's, the tasks it was graded on, in its task format), and whether a figure still shows what
its rows hold (the sources recorded in it by `stamp.save_figure`: unchanged, present)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from jacrl.provenance import CHANGED, NOISE, UNKNOWN, data_hash, dir_hash, rebuild_verdict
from jacrl.report.rows import format_of
from jacrl.report.stamp import FIGURE_SUFFIXES, located, read_stamp, source_stamp
from jacrl.tasks.record import read_conversion


class _Disk:
    """What is on disk now, hashed once per report: model dirs, adapters, tasks by id."""

    def __init__(self):
        self._dirs: dict[str, str | None] = {}
        self._tasks: dict[str, dict[str, dict]] = {}
        self.verdicts: dict[tuple, str] = {}  # `_adapter_verdict`'s, asked by two questions

    def dir_hash(self, path: Path) -> str | None:
        key = str(path)
        if key not in self._dirs:
            self._dirs[key] = dir_hash(path) if path.is_dir() else None
        return self._dirs[key]

    def model_dir(self, row: dict) -> Path | None:
        from jacrl.models.registry import ModelError, resolve
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
        """The project's tasks of a format by id, over all its task sets (`Project.task_sets`:
        data/ and learnable/data/; conversion: their conversion.jsonl)."""
        if fmt not in self._tasks:
            from jacrl.project import ProjectNotFound, project
            from jacrl.tasks.record import read_tasks

            self._tasks[fmt] = {}
            try:
                folders = project().task_sets
            except ProjectNotFound:
                folders = ()
            for data in folders:
                try:
                    recs = (
                        read_tasks(data / "tasks.jsonl") if fmt == "hole" else read_conversion(data)
                    )
                except (OSError, ValueError):
                    continue
                for t in recs:
                    self._tasks[fmt].setdefault(t["meta"]["id"], t)
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
    why = _adapter_verdict(row, disk)
    if why and why not in (NOISE, UNKNOWN):  # those are `rebuilt_note`'s: not stale
        out.append(f"adapter {why}" if why.startswith(CHANGED) else why)
    ids = [t["id"] for t in row.get("per_task") or []]
    if ids and prov.get("data_hash"):
        tasks = disk.tasks(format_of(row))
        if not all(i in tasks for i in ids):
            out.append("tasks missing")
        elif data_hash([tasks[i] for i in ids]) != prov["data_hash"]:
            out.append("tasks changed")
    return out


def _adapter_verdict(row: dict, disk: _Disk) -> str:
    """`provenance.rebuild_verdict` for the row's adapter folder on disk when its files differ
    from the row's record; "" when they match or there is nothing to check."""
    from jacrl.project import path_or

    adapter, prov = row.get("adapter"), row.get("provenance") or {}
    if not (adapter and prov.get("adapter_hash")):
        return ""
    apath = Path(adapter) if Path(adapter).is_absolute() else path_or(None, "root") / adapter
    now = disk.dir_hash(apath)
    if now is None or now == prov["adapter_hash"]:
        return ""
    key = (str(apath), row.get("artifact"), json.dumps(prov, sort_keys=True))
    if key not in disk.verdicts:  # reads manifests: once per row, for stale and rebuilt alike
        disk.verdicts[key] = rebuild_verdict(row, apath)
    return disk.verdicts[key]


def rebuilt_note(row: dict, disk: _Disk | None = None) -> str:
    """Not stale but worth saying: the row's adapter was rebuilt from the same inputs (the same
    artifact key) with other weights (training noise) or, for rows before adapter_weights_hash,
    possibly other weights. "" otherwise."""
    why = _adapter_verdict(row, disk or _Disk())
    return why if why in (NOISE, UNKNOWN) else ""


def mark_stale(rows: list[dict]) -> list[dict]:
    """The rows, each with `stale` set to its reasons joined ("" when fresh) and `rebuilt` to its
    `rebuilt_note`."""
    disk = _Disk()
    return [
        {**r, "stale": ", ".join(stale_reasons(r, disk)), "rebuilt": rebuilt_note(r, disk)}
        for r in rows
    ]


# -------------------------------------------------------------------------------------------
# figures: never older than their rows (the provenance `stamp.save_figure` writes into them)
# -------------------------------------------------------------------------------------------


def figure_stale_reasons(path: str | os.PathLike) -> list[str]:
    """Why a figure no longer shows what its rows hold: it has no provenance (drawn by something
    else, or before figures carried it), a source it was drawn from is missing (but a `local`
    one: a git-ignored run file a clone never has), or a source's
    bytes differ from those it was drawn from (a row appended, the file rewritten). [] when every
    recorded source is unchanged. Rows drawn from memory cannot be checked and say so."""
    rec = read_stamp(path)
    if rec is None:
        return ["no provenance"]
    if not rec["sources"]:
        return ["no rows recorded"]
    out = []
    for src in rec["sources"]:
        if not src.get("path"):
            out.append("drawn from rows in memory, not a file (cannot be checked)")
            continue
        p = located(src["path"], path)
        if not p.is_file() and src.get("local"):  # a git-ignored run file: not in a clone
            continue
        if not p.is_file():
            out.append(f"{src['path']} missing")
        elif (now := source_stamp(p))["sha256"] != src.get("sha256"):
            out.append(
                f"{src['path']} changed ({src.get('rows')} rows when drawn, {now['rows']} now)"
            )
    return out


def stale_figures(figures_dir: str | os.PathLike) -> dict[Path, str]:
    """{figure: its reasons, joined} for each figure (.png, .svg, .pdf) in the folder that
    `figure_stale_reasons` flags; {} for a missing folder or when every figure is fresh."""
    d = Path(figures_dir)
    figs = (
        sorted(p for p in d.iterdir() if p.suffix.lower() in FIGURE_SUFFIXES) if d.is_dir() else []
    )
    return {p: ", ".join(why) for p in figs if (why := figure_stale_reasons(p))}


def figures_note(figures_dir: str | os.PathLike | None) -> str:
    """One line per stale figure in the folder (None: the project's figures/, when there is a
    project), under a header, a figure's .png, .svg and .pdf on one line when they are stale for
    the same reason; "" when none is stale."""
    from jacrl.project import ProjectNotFound, path_or

    try:
        d = path_or(figures_dir, "figures")
    except ProjectNotFound:
        return ""
    stale = stale_figures(d)
    if not stale:
        return ""
    same: dict[tuple[str, str], list[Path]] = {}  # a figure's .png, .svg and .pdf: one line
    for p, why in stale.items():
        same.setdefault((p.stem, why), []).append(p)
    lines = [
        f"{len(same)} figure(s) in {d} not drawn from the rows on disk now (redraw them: "
        "`jacrl ladder show`, `jacrl demo`):"
    ]
    for (_, why), paths in same.items():
        first, *rest = sorted(paths, key=lambda p: FIGURE_SUFFIXES.index(p.suffix.lower()))
        lines.append(
            f"  {first.name}: {why}" + (f"; also {', '.join(p.name for p in rest)}" if rest else "")
        )
    return "\n".join(lines)
