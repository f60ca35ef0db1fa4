"""Completion -> body -> spliced program.

A model answers a hole in many shapes: a bare body; the body in a fence of any tag (```jac,
```Jac, ```python, bare ```); the whole unit (`def f(...) -> T { ... }`); the whole driver file
echoed back with the answer inside; prose around any of these; a fence left open by a truncated
generation. The hole's unit (kind, name, enclosing archetypes, the body lines around a partial hole)
comes from the driver at build time, and the unit is located by it in code only: braces and unit
keywords inside strings, f-strings and comments are ignored.
"""

from __future__ import annotations

import re
import textwrap

from jacrl import jacsyntax
from jacrl.drivers import HOLE_TOKEN, TODO_LINE, Unit

FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+.#-]*)[ \t]*$", re.M)
MARKER_LINE = re.compile(r"^[ \t]*#\s*(>>>HOLE|<<<HOLE)\b.*$\n?", re.M)
UNIT_START = re.compile(r"^\s*(?:@[^\n]*\n\s*)*(?:(?:async|static|override)\s+)*"
                        r"(def|can|impl)\b")


def code_blocks(completion: str) -> list[str]:
    """The fenced blocks of a completion, ```jac-tagged ones first, then in order (an unclosed last
    fence runs to the end); the whole completion when it has no fence."""
    fences = list(FENCE.finditer(completion))
    if not fences:
        return [completion]
    tagged, k = [], 0
    while k < len(fences):
        opening = fences[k]
        if k + 1 < len(fences):
            text = completion[opening.end() + 1:fences[k + 1].start()]
            k += 2
        else:  # unclosed: a truncated generation
            text = completion[opening.end() + 1:]
            k += 1
        tagged.append((opening.group(1).lower() != "jac", text))
    return [text for _, text in sorted(tagged, key=lambda t: t[0])]


def _normalize(body: str) -> str:
    """Drop marker and TODO lines and blank edges, dedent (code lines only)."""
    body = MARKER_LINE.sub("", body)
    lines = [ln for ln in body.split("\n") if ln.strip() != TODO_LINE]
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return dedent("\n".join(lines))


def dedent(body: str) -> str:
    """textwrap.dedent that leaves lines inside multi-line strings alone."""
    lines = body.split("\n")
    in_code = jacsyntax.line_starts_in_code(body)
    margins = [len(ln) - len(ln.lstrip(" \t")) for ln, c in zip(lines, in_code) if c and ln.strip()]
    cut = min(margins, default=0)
    if cut == 0 and margins and margins[0] == 0 and len(margins) > 1 and min(margins[1:]) > 0:
        # the first line lost its indentation (an answer that was .strip()ped): the others still
        # carry the body's margin, which matters for indentation-sensitive `match` arms
        cut = min(margins[1:])
    return "\n".join(ln[cut:] if c and ln[:cut].strip() == "" else ln
                     for ln, c in zip(lines, in_code))


def _find_unit_body(code: str, unit: Unit) -> str | None:
    """The body of `unit` inside `code` (an echoed file or a whole unit), or None."""
    mask = jacsyntax.code_mask(code)
    heads = jacsyntax.headers(code, mask)
    by_brace = {h.brace: h for h in heads}
    best, best_rank = None, -1
    named = [h for h in heads if h.kind == unit.kind and h.name == unit.name]
    for h, chain in zip(named, jacsyntax.enclosing_many(mask, [h.start for h in named])):
        containers = tuple(by_brace[b].name for b in chain if b in by_brace)
        rank = 2 if containers == unit.containers else (1 if not containers else 0)
        if rank > best_rank:
            best, best_rank = h, rank
    if best is None:
        return None
    close = jacsyntax.match_brace(mask, best.brace)
    return code[best.brace + 1:close if close is not None else len(code)]


def _strip_around(body: str, unit: Unit) -> str:
    """For a partial-body hole: cut the unit's own lines before and after the hole, when the
    answer (a whole unit or file) repeats them."""
    lines = body.split("\n")
    key = [ln.strip() for ln in lines]

    def nonblank(text: str) -> list[str]:
        return [ln.strip() for ln in text.split("\n") if ln.strip()]

    before, after = nonblank(unit.before), nonblank(unit.after)
    code_idx = [i for i, k in enumerate(key) if k]
    if before and [key[i] for i in code_idx[:len(before)]] == before:
        lines = lines[code_idx[len(before) - 1] + 1:]
        key = [ln.strip() for ln in lines]
        code_idx = [i for i, k in enumerate(key) if k]
    if after and len(code_idx) >= len(after) and [key[i] for i in code_idx[-len(after):]] == after:
        lines = lines[:code_idx[-len(after)]]
    return "\n".join(lines)


def extract_body(completion: str, unit: Unit) -> str:
    """The body a completion proposes for the hole of `unit` ('' when there is none)."""
    blocks = code_blocks(completion)
    for block in blocks:  # an echoed file or a whole unit: take the unit's body by name
        body = _find_unit_body(block, unit)
        if body is not None:
            body = _normalize(body)
            return _normalize(_strip_around(body, unit)) if unit.partial else body
    code = blocks[0]
    m = UNIT_START.match(code)
    if m:  # a whole unit under another name or signature: unwrap it, never nest it
        mask = jacsyntax.code_mask(code)
        brace = mask.find("{", m.end())
        close = jacsyntax.match_brace(mask, brace) if brace >= 0 else None
        if brace >= 0 and (close is None or not mask[close + 1:].strip()):
            code = code[brace + 1:close if close is not None else len(code)]
    return _normalize(code)


def splice(template: str, body: str) -> str:
    """Replace the template's hole line with `body`, re-indented to the hole's indentation (code
    lines only: text inside multi-line strings is kept byte for byte)."""
    lines = template.split("\n")
    holes = [i for i, ln in enumerate(lines) if ln.strip() == HOLE_TOKEN]
    if len(holes) != 1:
        raise ValueError(f"template must have exactly one {HOLE_TOKEN} line, has {len(holes)}")
    i = holes[0]
    indent = lines[i][:len(lines[i]) - len(lines[i].lstrip())]
    body = dedent(body)
    in_code = jacsyntax.line_starts_in_code(body)
    new = [indent + ln if c and ln.strip() else ln
           for ln, c in zip(body.split("\n"), in_code)]
    return "\n".join(lines[:i] + new + lines[i + 1:])
