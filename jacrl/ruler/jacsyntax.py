"""A lexical view of Jac source: which characters are code (not strings or comments), brace
matching on code only, and unit headers (`def f(...) -> T {`, `can act with X entry {`, ...).

This is deliberately not a parser: model output is often broken or truncated, and jaclang's own
parser can hang on such input. Everything here is total and linear-time up to a log factor, at
any nesting depth: no recursion (model output can nest thousands deep), no rescans per match
(tests/test_reward_never_raises.py bounds the CPU per 16 KB).
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import re

STRING_PREFIX = re.compile(r"(?i)(rb|br|rf|fr|r|b|f|u)?('''|\"\"\"|'|\")")
UNIT_KINDS = ("def", "can", "impl", "walker", "node", "obj", "edge", "class", "enum")
# kind (with optional access tag such as def:pub) followed by a dotted name
HEADER = re.compile(r"\b(" + "|".join(UNIT_KINDS) + r")(?::\w+)?\s+([A-Za-z_][\w.]*)")
# Jac's object-spatial idioms as substring markers, with the weights of the earlier harness's v2
# reward (its additive formula, kept for comparison); `idiom_count` is the eval rows' avg_idiom.
IDIOMS = {
    "visit ": 3,
    "-->": 3,
    "<--": 3,
    "++>": 3,
    "<++": 3,
    "spawn": 3,
    "disengage": 3,
    "report ": 2,
    " here": 2,
    " root": 2,
    "walker ": 2,
    "node ": 2,
    "edge ": 2,
    "with entry": 1,
    "with exit": 1,
    "can ": 1,
    " obj ": 1,
    "has ": 1,
}


def idiom_count(body: str) -> int:
    """Occurrences of the idiom markers in `body` (substring counts, as the earlier harness)."""
    return sum(body.count(m) for m in IDIOMS)


def idiom_score(body: str) -> float:
    """The v2 reward's idiom term: weighted marker count / 8, capped at 1."""
    return min(sum(w * body.count(m) for m, w in IDIOMS.items()) / 8.0, 1.0)


@functools.lru_cache(maxsize=8)
def literal_spans(text: str) -> tuple[tuple[int, int, str], ...]:
    """(start, end, kind) of every comment ("comment", "block") and string ("string") in `text`,
    in order. Unterminated strings or comments run to the end of the text.

    Cached: grading one completion asks this of the same few texts (a block, its body, the
    dedented body) about six times over, from `code_mask`, `has_code` and `line_starts_in_code`."""
    spans = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "#":
            if text.startswith("#*", i):
                end = text.find("*#", i + 2)
                end, kind = (n if end < 0 else end + 2), "block"
            else:
                end = text.find("\n", i)
                end, kind = (n if end < 0 else end), "comment"
            spans.append((i, end, kind))
            i = end
            continue
        m = STRING_PREFIX.match(text, i) if c in "'\"rRbBfFuU" else None
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = _string_end(text, m.end(), m.group(2), "f" in (m.group(1) or "").lower())
            spans.append((i, end, "string"))
            i = end
            continue
        i += 1
    return tuple(spans)


# what a body may hold and still have no code: Jac has no `pass` (models write it anyway), `...`
# and empty braces are placeholders, a lone `;` ends nothing
PLACEHOLDER = re.compile(r"\bpass\b|\.\.\.|[{};\s]")


def has_code(text: str) -> bool:
    """Is anything left of `text` once comments (`#`, `#* *#`), whitespace and placeholders
    (`pass`, `...`, braces, `;`) are removed? String literals are code: `return "# x";` is."""
    parts, last = [], 0
    for a, b, kind in literal_spans(text):
        parts += [text[last:a], " S " if kind == "string" else " "]
        last = b
    parts.append(text[last:])
    return bool(PLACEHOLDER.sub("", "".join(parts)))


def code_mask(text: str) -> str:
    """`text` with every character inside a string literal or comment replaced by a space
    (newlines kept), so offsets are unchanged and searches over the result see only code."""
    out = list(text)
    for a, b, _ in literal_spans(text):
        for k in range(a, b):
            if out[k] != "\n":
                out[k] = " "
    return "".join(out)


def _string_end(text: str, i: int, quote: str, fstring: bool) -> int:
    """Offset just past the closing quote of a string whose body starts at `i`. F-strings nest
    (a replacement field holds strings, which hold fields...) to any depth: an explicit stack, not
    recursion, keeps this total on model output (`f"{` x 500 once overflowed Python's stack)."""
    n = len(text)
    # frames: a string body (quote, is f-string) or an f-string replacement field [brace depth]
    stack: list[tuple[str, bool] | list[int]] = [(quote, fstring)]
    while stack:
        if i >= n:
            return n  # unterminated: everything open runs to the end
        top = stack[-1]
        c = text[i]
        if isinstance(top, tuple):  # inside a string body
            quote, fstring = top
            if c == "\\":
                i += 2
            elif text.startswith(quote, i):
                i += len(quote)
                stack.pop()
            elif c == "\n" and len(quote) == 1:
                stack.pop()  # single-quoted strings end at the line (unterminated)
            elif fstring and c == "{":
                if text.startswith("{{", i):
                    i += 2
                else:
                    i += 1
                    stack.append([1])
            else:
                i += 1
            continue
        # inside a replacement field: nested strings and braces
        m = STRING_PREFIX.match(text, i) if c in "'\"rRbBfFuU" else None
        if m and c in "'\"" or (m and not (text[i - 1].isalnum() or text[i - 1] == "_")):
            i = m.end()
            stack.append((m.group(2), "f" in (m.group(1) or "").lower()))
            continue
        if c == "{":
            top[0] += 1
        elif c == "}":
            top[0] -= 1
        elif c == "\n" and top[0] > 8:
            stack.pop()  # a runaway field ends at the line
            continue
        i += 1
        if not top[0]:
            stack.pop()
    return i


def match_brace(mask: str, open_at: int) -> int | None:
    """Offset of the `}` closing the `{` at `open_at` (on masked text), or None if unbalanced."""
    depth = 0
    for k in range(open_at, len(mask)):
        c = mask[k]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return k
    return None


@dataclasses.dataclass(frozen=True)
class Header:
    kind: str  # def, can, impl, walker, node, obj, edge, ...
    name: str
    start: int  # offset of the kind keyword
    brace: int  # offset of the unit's opening `{`
    signature: str  # header text from the keyword to the brace, whitespace collapsed


def headers(text: str, mask: str | None = None) -> list[Header]:
    """Every unit header in `text` whose `{` can be found (code only)."""
    mask = code_mask(text) if mask is None else mask
    found = []
    brace_after = None
    for m in HEADER.finditer(mask):
        brace_after = brace_after or _HeaderBraces(mask)  # built once, for the first header
        brace = brace_after(m.end())
        if brace is not None:
            sig = " ".join(text[m.start() : brace].split())
            found.append(Header(m.group(1), m.group(2), m.start(), brace, sig))
    return found


class _HeaderBraces:
    """The `{` that opens the body after a header name, skipping (...) and [...]; None if a `;`,
    `}` or unbalanced bracket comes first.

    That is the first `{`, `;`, `}`, `)` or `]` at or after the name at the name's own bracket
    level, so one pass indexes these stops by level and each header is a binary search: scanning
    forward from every header instead was quadratic (2.3 s of CPU for 16 KB of `def f(`)."""

    def __init__(self, mask: str):
        self.mask = mask
        self.at: list[int] = []  # offsets of the brackets, in order ...
        self.level: list[int] = []  # ... and the ([ level just after each
        self.stops: dict[int, list[int]] = {}  # ([ level -> offsets of the stops at it, in order
        level = 0
        for m in re.finditer(r"[()\[\]{};]", mask):
            c, k = m.group(), m.start()
            if c in ")]{};":
                self.stops.setdefault(level, []).append(k)
            if c in "([)]":
                level += 1 if c in "([" else -1
                self.at.append(k)
                self.level.append(level)

    def __call__(self, i: int) -> int | None:
        j = bisect.bisect_left(self.at, i)
        level = self.level[j - 1] if j else 0
        stops = self.stops.get(level, [])
        j = bisect.bisect_left(stops, i)
        return stops[j] if j < len(stops) and self.mask[stops[j]] == "{" else None


def enclosing(mask: str, pos: int) -> list[int]:
    """Offsets of the `{` of every brace block that contains `pos`, outermost first."""
    return enclosing_many(mask, [pos])[0]


def line_starts_in_code(text: str) -> list[bool]:
    """For each line of `text`: does it start in code (True), rather than inside a multi-line
    string or block comment (False)? Re-indenting must not touch the latter."""
    inside = [(a, b) for a, b, kind in literal_spans(text) if kind != "comment"]
    result, offset, j = [], 0, 0
    for line in text.split("\n"):
        while j < len(inside) and inside[j][1] <= offset:
            j += 1
        result.append(not (j < len(inside) and inside[j][0] < offset < inside[j][1]))
        offset += len(line) + 1
    return result


def brace_map(mask: str) -> dict[int, int]:
    """One pass over masked text: the closing offset of every matched `{`."""
    close: dict[int, int] = {}
    stack: list[int] = []
    for m in re.finditer(r"[{}]", mask):
        k = m.start()
        if mask[k] == "{":
            stack.append(k)
        elif stack:
            close[stack.pop()] = k
    return close


def enclosing_many(mask: str, positions: list[int]) -> list[list[int]]:
    """For each position, the offsets of the `{` of every block containing it, outermost first;
    one sweep for all positions."""
    order = sorted(range(len(positions)), key=lambda i: positions[i])
    result: list[list[int]] = [[] for _ in positions]
    stack: list[int] = []
    braces = [m.start() for m in re.finditer(r"[{}]", mask)]
    j = 0
    for i in order:
        p = positions[i]
        while j < len(braces) and braces[j] < p:
            k = braces[j]
            if mask[k] == "{":
                stack.append(k)
            elif stack:
                stack.pop()
            j += 1
        result[i] = list(stack)
    return result


def enclosing_names(
    mask: str, names: dict[int, str], positions: list[int], longest: int
) -> list[tuple[str, ...] | None]:
    """For each position, the names of the blocks containing it that `names` knows (by the offset
    of their `{`), outermost first; None where there are more than `longest`. One sweep, and no
    copy of a deep chain per position (a completion of 16 KB of nested units made that ~0.1 s)."""
    order = sorted(range(len(positions)), key=lambda i: positions[i])
    result: list[tuple[str, ...] | None] = [None] * len(positions)
    opened: list[bool] = []  # every open `{`: is it a named one?
    chain: list[str] = []  # the names of the open named ones
    braces = [m.start() for m in re.finditer(r"[{}]", mask)]
    j = 0
    for i in order:
        p = positions[i]
        while j < len(braces) and braces[j] < p:
            k = braces[j]
            if mask[k] == "{":
                opened.append(k in names)
                if opened[-1]:
                    chain.append(names[k])
            elif opened and opened.pop():
                chain.pop()
            j += 1
        result[i] = tuple(chain) if len(chain) <= longest else None
    return result
