"""Generated regions of the docs: text between `<!-- generated:NAME -->` and
`<!-- /generated:NAME -->` is written by the run that measured it (a bench, the real-model
ladder), never by hand, so a figure in prose cannot drift from its recorded run; a test renders
each region again from the recorded JSON and compares."""

from __future__ import annotations

import os
import re
from pathlib import Path


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- generated:{name} -->", f"<!-- /generated:{name} -->"


def read_region(doc: str | os.PathLike, name: str) -> str:
    """The text of region `name` in `doc` (without its markers)."""
    text = Path(doc).read_text()
    start, end = _markers(name)
    m = re.search(re.escape(start) + r"\n(.*?)" + re.escape(end), text, re.S)
    if not m:
        raise ValueError(f"{doc}: no region {name!r} ({start} ... {end})")
    return m.group(1)


def write_region(doc: str | os.PathLike, name: str, body: str) -> None:
    """Replace region `name` of `doc` with `body` (ending in a newline), atomically."""
    path = Path(doc)
    read_region(path, name)  # the region must exist: a typo never appends
    start, end = _markers(name)
    text = path.read_text()
    new = re.sub(
        re.escape(start) + r"\n.*?" + re.escape(end),
        lambda _: f"{start}\n{body.rstrip()}\n{end}",
        text,
        flags=re.S,
    )
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(new)
    os.replace(tmp, path)
