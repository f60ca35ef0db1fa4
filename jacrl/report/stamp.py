"""Figures never older than their rows: every figure the report writes (`save_figure`) carries,
inside its own file, the provenance of what it was drawn from, and `figure_stale_reasons` (in
`jacrl.report.stale`) compares that with the files on disk now.

The record is JSON, `{"figure", "drawn_rows", "sources": [{"path", "sha256", "rows",
"code_versions"}]}`: each source file (a results file, a metrics.jsonl) with the sha256 of its
bytes when the figure was drawn, its row count (parseable JSON lines) and the distinct code
versions its rows carry (`provenance.code_version`; for a metrics file, its artifact manifest's).
A source inside the project the figure is in is recorded relative to the figure's folder (so a
moved checkout still checks), any other by its absolute path; rows drawn from memory, not from a
file, have path null (such a figure cannot be checked, and is reported so).

Where it is kept: PNG, a tEXt chunk `jacrl-provenance`; SVG, the Dublin Core description; PDF,
the document's Subject (both prefixed `jacrl-provenance `).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

from jacrl.provenance import sha256_bytes

KEY = "jacrl-provenance"
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")
_DC = "{http://purl.org/dc/elements/1.1/}"


def _root() -> Path | None:
    from jacrl.project import ProjectNotFound, project

    try:
        return project().root.resolve()
    except ProjectNotFound:
        return None


def _lines(data: bytes) -> list[dict]:
    out = []
    for line in data.decode("utf-8", "replace").split("\n"):
        if line.strip():
            try:
                rec = json.loads(line)
            except ValueError:  # a torn last line is not a row (as `results.read_rows`)
                continue
            out.append(rec if isinstance(rec, dict) else {})
    return out


def _versions(rows: Sequence[dict]) -> list[str]:
    return sorted(
        {str(cv) for r in rows if (cv := (r.get("provenance") or {}).get("code_version"))}
    )


def source_stamp(path: str | os.PathLike) -> dict:
    """{"path" (absolute), "sha256", "rows", "code_versions"} of a JSONL file as it is now. Take
    it before reading the rows a figure is drawn from: a row appended in between then makes the
    figure stale, never falsely fresh."""
    p = Path(path).resolve()
    data = p.read_bytes()
    rows = _lines(data)
    versions = _versions(rows)
    manifest = p.parent / "manifest.json"
    if not versions and manifest.is_file():  # an artifact's metrics.jsonl
        try:
            cv = json.loads(manifest.read_text()).get("key_parts", {}).get("code_version")
        except (ValueError, AttributeError):
            cv = None
        versions = [cv] if cv else []
    return {
        "path": str(p),
        "sha256": sha256_bytes(data),
        "rows": len(rows),
        "code_versions": versions,
    }


def rows_stamp(rows: Sequence[dict]) -> dict:
    """The stamp of rows held in memory (no file to check against later: path null)."""
    data = "".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in rows).encode()
    return {
        "path": None,
        "sha256": sha256_bytes(data),
        "rows": len(rows),
        "code_versions": _versions(rows),
    }


def _recorded(src: dict, fig_dir: Path) -> dict:
    """src with its path relative to the figure's folder when both are in the same project."""
    if not src.get("path"):
        return src
    p, root = Path(src["path"]).resolve(), _root()
    if root is not None and p.is_relative_to(root) and fig_dir.resolve().is_relative_to(root):
        return {**src, "path": os.path.relpath(p, fig_dir.resolve())}
    return {**src, "path": str(p)}


def located(recorded: str, figure: str | os.PathLike) -> Path:
    """Where a recorded source path points, for the figure that recorded it."""
    p = Path(recorded)
    return p if p.is_absolute() else (Path(figure).resolve().parent / p).resolve()


def save_figure(
    fig,
    path: str | os.PathLike,
    sources: Sequence[dict],
    drawn_rows: int | None = None,
    dpi: int = 110,
) -> Path:
    """fig saved as `path` (.png, .svg or .pdf) with the provenance of `sources` (stamps from
    `source_stamp` / `rows_stamp`) inside the file."""
    path = Path(path)
    fmt = path.suffix.lower()
    if fmt not in FIGURE_SUFFIXES:
        raise ValueError(f"{path}: a figure is one of {', '.join(FIGURE_SUFFIXES)}")
    rec = {
        "figure": path.name,
        "drawn_rows": drawn_rows,
        "sources": [_recorded(s, path.parent) for s in sources],
    }
    text = json.dumps(rec, sort_keys=True)
    # no dates and fixed SVG ids: the same figure gives the same bytes, so a redraw of unchanged
    # rows leaves tracked figures unchanged
    meta = {
        ".png": {KEY: text},
        ".svg": {"Description": f"{KEY} {text}", "Date": None},
        ".pdf": {"Subject": f"{KEY} {text}", "CreationDate": None},
    }[fmt]
    import matplotlib

    with matplotlib.rc_context({"svg.hashsalt": KEY}):
        fig.savefig(path, dpi=dpi, metadata=meta)
    return path


def save_formats(
    fig, png: str | os.PathLike, sources: Sequence[dict], drawn_rows: int | None = None
) -> Path:
    """fig saved as `png` and, beside it, as .svg and .pdf (for papers: vector, any size), each
    carrying the provenance of `sources` (`save_figure`). Returns the PNG's path."""
    png = Path(png)
    for suffix in (".svg", ".pdf"):
        save_figure(fig, png.with_suffix(suffix), sources, drawn_rows)
    return save_figure(fig, png, sources, drawn_rows)


def _raw(path: Path) -> str | None:
    """The provenance text stored in a figure file, None when there is none."""
    fmt = path.suffix.lower()
    if fmt == ".png":
        from PIL import Image

        with Image.open(path) as im:
            return getattr(im, "text", {}).get(KEY)
    if fmt == ".svg":
        import xml.etree.ElementTree as ET

        node = ET.parse(path).getroot().find(f".//{_DC}description")
        text = node.text if node is not None else None
    elif fmt == ".pdf":
        m = re.search(rb"/Subject \(((?:[^\\)]|\\.)*)\)", path.read_bytes(), re.S)
        text = (
            re.sub(
                r"\\(.)", lambda g: {"n": "\n", "r": "\r"}.get(g[1], g[1]), m[1].decode("latin-1")
            )
            if m
            else None
        )
    else:
        return None
    return text[len(KEY) + 1 :] if text and text.startswith(KEY + " ") else None


def read_stamp(path: str | os.PathLike) -> dict | None:
    """A figure's provenance record, None when it has none (or it cannot be read)."""
    try:
        text = _raw(Path(path))
        rec = json.loads(text) if text else None
    except (OSError, ValueError, SyntaxError):  # unreadable image, bad XML or JSON
        return None
    return rec if isinstance(rec, dict) and isinstance(rec.get("sources"), list) else None
