"""Where a warning points: the first caller outside the module that raises it."""

from __future__ import annotations

import sys


def outside(file: str, *through: str) -> int:
    """`warnings.warn`'s stacklevel, for a call in `file`, of the first frame not in `file` nor in
    `through` (modules that call into it on their callers' behalf): the line that called into
    the module, however many of the module's own frames lie between (a fixed stacklevel points
    inside the module once a helper adds a frame). `warn(
    skip_file_prefixes=...)` means the same, but Python 3.12.1's does not skip the caller's
    frames (measured here)."""
    frame, level = sys._getframe(1), 1
    files = {file, *through}
    while frame is not None and frame.f_code.co_filename in files:
        frame, level = frame.f_back, level + 1
    return level
