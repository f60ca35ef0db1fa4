"""Generated regions of the docs: text between `<!-- generated:NAME -->` and
`<!-- /generated:NAME -->` is written by the run that measured it (a bench, the real-model
ladder), never by hand, so a figure in prose cannot drift from its recorded run; a test renders
each region again from the recorded JSON or rows and compares.

A region is a block (a newline after its opening mark: a table) or inline (a figure inside a
sentence); writing keeps its form. The one mechanism for every generated text: the ladder's tables
(`jacrl.report.markdown`) and the benches' figures (`bench/docs_figures.py`) both write here."""

from __future__ import annotations

import os
import re
from pathlib import Path


def _marks(name: str) -> tuple[str, str]:
    return f"<!-- generated:{name} -->", f"<!-- /generated:{name} -->"


def _pattern(name: str) -> re.Pattern:
    start, end = _marks(name)
    return re.compile(re.escape(start) + r"(\n?)(.*?)" + re.escape(end), re.S)


def _missing(doc: str | os.PathLike, name: str) -> ValueError:
    start, end = _marks(name)
    return ValueError(f"{doc}: no region {name!r} ({start} ... {end})")


def regions_in(doc: str | os.PathLike, name: str) -> list[str]:
    """The texts of every region `name` in `doc` (without their marks; [] when none)."""
    return [m.group(2) for m in _pattern(name).finditer(Path(doc).read_text())]


def read_region(doc: str | os.PathLike, name: str) -> str:
    """The text of the first region `name` in `doc` (without its marks)."""
    found = regions_in(doc, name)
    if not found:
        raise _missing(doc, name)
    return found[0]


def write_region(doc: str | os.PathLike, name: str, body: str) -> bool:
    """Replace every region `name` of `doc` with `body`, atomically; a block region gets `body`
    on lines of its own, an inline one `body` stripped. True when the file changed. The region
    must exist: a typo never appends."""
    path = Path(doc)
    old = path.read_text()
    start, end = _marks(name)
    new, n = _pattern(name).subn(
        lambda m: (
            f"{start}\n{body.rstrip()}\n{end}" if m.group(1) else f"{start}{body.strip()}{end}"
        ),
        old,
    )
    if not n:
        raise _missing(doc, name)
    if new == old:
        return False
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(new)
    os.replace(tmp, path)
    return True
