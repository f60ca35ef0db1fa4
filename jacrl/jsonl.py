"""JSON Lines files, the one way jacrl writes and reads them: one JSON object per line, UTF-8
as is (`ensure_ascii=False`), keys in the order given.

Owns: `dumps` (one record as its line), `write` (a whole file, atomically: temp file, fsync,
rename), `append` (one record as one `write` + `fsync` under an exclusive lock; a torn last line
left by a crash is closed when it is a whole record, else dropped with a warning), `read` (every
record; a torn last line is skipped with a warning, any other bad line raises `JSONLError`, one
line naming the file and the line number).
"""

from __future__ import annotations

import fcntl
import json
import os
import warnings
from collections.abc import Iterable, Mapping
from pathlib import Path

from jacrl.callers import outside


class JSONLError(ValueError):
    """A line that is not a JSON object and not a torn last line (message: file:line: why)."""


def dumps(record: Mapping) -> str:
    """The record as one line, newline included."""
    return json.dumps(record, ensure_ascii=False) + "\n"


def write(path: str | os.PathLike, records: Iterable[Mapping]) -> Path:
    """Replace the file with these records at once: a reader sees the old file or the new one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(dumps(r) for r in records)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def last_line_start(fd: int, size: int) -> int:
    """Offset just after the file's last newline (0 when it has none), read backwards."""
    pos = size
    while pos > 0:
        step = min(1 << 16, pos)
        pos -= step
        i = os.pread(fd, step, pos).rfind(b"\n")
        if i >= 0:
            return pos + i + 1
    return 0


def is_record(data: bytes) -> bool:
    """Whether data is one JSON object (a whole line, not a torn one)."""
    try:
        return isinstance(json.loads(data), dict)
    except ValueError:
        return False


def append(path: str | os.PathLike, record: Mapping, through: tuple[str, ...] = ()) -> None:
    """Append one record as one line with a single write + fsync, under an exclusive flock (so
    two writers never interleave and another writer's line is never taken for a torn one). The
    torn-line warning points at the first caller outside this file and the files `through`
    (a module that appends through this one, as `results.append_row`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = dumps(record).encode()
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":  # a last line without its newline
            start = last_line_start(fd, size)
            if is_record(os.pread(fd, size - start, start)):
                data = b"\n" + data
            else:
                line = os.pread(fd, start, 0).count(b"\n") + 1
                warnings.warn(
                    f"{path}: dropped a torn last line {line} (an interrupted write) before "
                    "appending",
                    stacklevel=outside(__file__, *through),
                )
                os.ftruncate(fd, start)
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(f"short write to {path}: {written} of {len(data)} bytes")
        os.fsync(fd)
    finally:
        os.close(fd)


def read(path: str | os.PathLike) -> list[dict]:
    """Every record of the file, in order ([] for an empty one). Raises FileNotFoundError when
    it is missing and JSONLError for a bad line other than a torn last one."""
    path = Path(path)
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as e:
            if i == len(lines):  # no newline after it: a write cut short by a crash
                warnings.warn(f"{path}:{i}: skipped a torn last line", stacklevel=outside(__file__))
                continue
            raise JSONLError(f"{path}:{i}: not JSON ({e.msg})") from None
        if not isinstance(rec, dict):
            raise JSONLError(f"{path}:{i}: not a JSON object")
        out.append(rec)
    return out
