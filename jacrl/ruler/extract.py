"""Completion -> body -> spliced program.

A model answers a hole in many shapes: a bare body; the body in a fence of any tag (```jac,
```Jac, ```python, bare ```); the whole unit (`def f(...) -> T { ... }`); the whole driver file
echoed back with the answer inside; prose around any of these; a fence left open by a truncated
generation; any of these inside `<answer>...</answer>` after a `<think>...</think>` (the tags
mlx-lm-lora's default GRPO system prompt asks for; thinking is never taken as the answer). The
hole's unit (kind, name, enclosing archetypes, the body lines around a partial hole) comes from the
driver at build time, and the unit is located by it in code only: braces and unit keywords inside
strings, f-strings and comments are ignored. Text is `clean`ed first (line endings, BOM,
zero-width and odd space characters, surrogates, NUL), and fences follow CommonMark: ``` or ~~~,
three or more, any indentation, closed only by the same character at least as long.
"""

from __future__ import annotations

import re

from jacrl.ruler import jacsyntax
from jacrl.ruler.drivers import HOLE_TOKEN, TODO_LINE, Unit

FENCE = re.compile(r"([ \t]*)(`{3,}|~{3,})[ \t]*(.*)")  # one whole line: indent, fence, info
MARKER_LINE = re.compile(r"^[ \t]*#\s*(>>>HOLE|<<<HOLE)\b.*$\n?", re.M)
THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.S | re.I)  # unclosed: runs to the end
ANSWER = re.compile(r"<answer>(.*?)(?:</answer>|\Z)", re.S | re.I)  # unclosed: truncated
UNIT_START = re.compile(
    r"^\s*(?:@[^\n]*\n\s*)*(?:(?:async|static|override)\s+)*"
    r"(def|can|impl)\b"
)


# Removed: BOM, zero-width space/non-joiner/joiner, word joiner, NUL. Made an ASCII space: every
# Unicode space separator (Zs) but the space itself (NBSP, U+1680, U+2000-U+200A, U+202F, U+205F,
# U+3000), which a model or a chat UI puts where indentation goes.
_CLEAN = {c: None for c in (0x00, 0xFEFF, 0x200B, 0x200C, 0x200D, 0x2060)} | {
    c: " " for c in (0xA0, 0x1680, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000)
}
SURROGATE = re.compile("[\ud800-\udfff]")


def clean(text: str) -> str:
    """The completion as text every consumer can key, splice and encode: `_CLEAN`'s characters
    dropped or made spaces, CRLF and lone CR made LF, surrogates paired into their character or,
    lone, made U+FFFD (a str holding one cannot be UTF-8 encoded). Idempotent.

    The replacement is global, inside string literals too: telling code from strings needs the
    text cleaned first, no gold body or driver holds any of these characters (a test checks), and
    a model that means an NBSP or a joiner inside a string is vanishingly rare next to one whose
    indentation or fence they break."""
    if SURROGATE.search(text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text.translate(_CLEAN).replace("\r\n", "\n").replace("\r", "\n")


def answer_text(completion: str) -> str:
    """The `clean`ed completion without its thinking: every `<think>...</think>` (an unclosed one
    runs to the end) and everything up to a `</think>` whose `<think>` was in the prompt are
    dropped; then the content of the last `<answer>` (to `</answer>` or the end), if any."""
    text = THINK.sub("", clean(completion))
    close = text.lower().rfind("</think>")
    if close >= 0:
        text = text[close + len("</think>") :]
    answers = ANSWER.findall(text)
    return answers[-1] if answers else text


def code_blocks(completion: str) -> list[str]:
    """The fenced blocks of a completion's answer (`answer_text`), ```jac-tagged ones first, then
    in order (an unclosed last fence runs to the end); the whole answer when it has no fence.

    CommonMark's rules: a fence is 3+ backticks or tildes (a backtick fence's info string has no
    backtick, else it is inline code); only a bare fence of the same character, at least as long,
    closes it, so a ```` block keeps its ``` lines; each content line loses up to the opening
    fence's indentation (a fence in a list item), so multi-line strings survive."""
    lines = answer_text(completion).split("\n")
    blocks: list[tuple[bool, str]] = []
    opening = None  # (indent width, fence, is jac, first content line)
    for i, line in enumerate(lines + [None]):  # None: the end, closing an open fence
        m = FENCE.fullmatch(line) if line is not None else None
        if opening is None:
            if m and not (m[2][0] == "`" and "`" in m[3]):
                tag = (m[3].split() or [""])[0].lower()
                opening = (len(m[1]), m[2], tag == "jac", i + 1)
            continue
        width, fence, is_jac, start = opening
        closes = m and m[2][0] == fence[0] and len(m[2]) >= len(fence) and not m[3].strip()
        if closes or line is None:
            body = [ln[min(width, len(ln) - len(ln.lstrip(" \t"))) :] for ln in lines[start:i]]
            # a closed block keeps the newline before its fence; an unclosed one ends as written
            blocks.append(
                (not is_jac, "".join(ln + "\n" for ln in body) if closes else "\n".join(body))
            )
            opening = None
    if not blocks:
        return ["\n".join(lines)]
    return [text for _, text in sorted(blocks, key=lambda b: b[0])]


def _normalize(body: str) -> str:
    """Drop marker and TODO lines and blank edges, dedent (code lines only)."""
    body = MARKER_LINE.sub("", body)
    lines = [ln for ln in body.split("\n") if ln.strip() != TODO_LINE]
    kept = [i for i, ln in enumerate(lines) if ln.strip()]
    return dedent("\n".join(lines[kept[0] : kept[-1] + 1] if kept else []))


def dedent(body: str) -> str:
    """textwrap.dedent that leaves lines inside multi-line strings alone; idempotent.

    One exception to the common margin: an answer that was .strip()ped lost the indentation of its
    first line only. When the first code line is shallower than every later one and some later line
    starts a statement (bracket depth 0), the later lines are cut to their own margin (this matters
    for indentation-sensitive `match` arms). A first line that opens a bracket continued by deeper
    lines (`x = f(` + args) is left as written, so a second pass never cuts again.
    """
    lines = body.split("\n")
    in_code = jacsyntax.line_starts_in_code(body)
    code = [i for i, (ln, c) in enumerate(zip(lines, in_code, strict=True)) if c and ln.strip()]
    margin = {i: len(lines[i]) - len(lines[i].lstrip(" \t")) for i in code}
    cut = min(margin.values(), default=0)
    if len(code) > 1:
        rest = min(margin[i] for i in code[1:])
        depth = _line_depths(body)
        if margin[code[0]] < rest and any(depth[i] == 0 for i in code[1:]):
            cut = rest
    # strip up to `cut` leading whitespace (the first line may have less)
    return "\n".join(
        ln[min(cut, len(ln) - len(ln.lstrip(" \t"))) :] if c else ln
        for ln, c in zip(lines, in_code, strict=True)
    )


def _line_depths(body: str) -> list[int]:
    """Bracket depth (code only) at the start of each line, after its leading closers: 0 for a
    line that starts a statement or closes a block back to the top."""
    mask = jacsyntax.code_mask(body)
    depths, depth = [], 0
    for line in mask.split("\n"):
        lead = line.lstrip()
        k = len(lead) - len(lead.lstrip(")]}"))
        depths.append(max(depth - k, 0))
        for c in line:
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth = max(depth - 1, 0)  # a stray closer (a partial body) does not go negative
    return depths


def _find_unit_body(code: str, unit: Unit) -> str | None:
    """The body of `unit` inside `code` (an echoed file or a whole unit), or None."""
    mask = jacsyntax.code_mask(code)
    heads = jacsyntax.headers(code, mask)
    names = {h.brace: h.name for h in heads}
    best, best_rank = None, -1
    named = [h for h in heads if h.kind == unit.kind and h.name == unit.name]
    chains = jacsyntax.enclosing_names(mask, names, [h.start for h in named], len(unit.containers))
    for h, containers in zip(named, chains, strict=True):
        # None: nested deeper than the unit's containers, so neither of the ranks below
        rank = 2 if containers == unit.containers else (1 if containers == () else 0)
        if rank > best_rank:
            best, best_rank = h, rank
    if best is None:
        return None
    close = jacsyntax.match_brace(mask, best.brace)
    return code[best.brace + 1 : close if close is not None else len(code)]


def _strip_around(body: str, unit: Unit) -> str:
    """For a partial-body hole: cut the unit's own lines before and after the hole, when the
    answer (a whole unit or file) repeats them."""
    lines = body.split("\n")
    key = [ln.strip() for ln in lines]

    def nonblank(text: str) -> list[str]:
        return [ln.strip() for ln in text.split("\n") if ln.strip()]

    before, after = nonblank(unit.before), nonblank(unit.after)
    code_idx = [i for i, k in enumerate(key) if k]
    if before and [key[i] for i in code_idx[: len(before)]] == before:
        lines = lines[code_idx[len(before) - 1] + 1 :]
        key = [ln.strip() for ln in lines]
        code_idx = [i for i, k in enumerate(key) if k]
    if after and len(code_idx) >= len(after) and [key[i] for i in code_idx[-len(after) :]] == after:
        lines = lines[: code_idx[-len(after)]]
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
        if brace >= 0 and (close is None or not mask[close + 1 :].strip()):
            code = code[brace + 1 : close if close is not None else len(code)]
    return _normalize(code)


def splice(template: str, body: str) -> str:
    """Replace the template's hole line with `body`, re-indented to the hole's indentation (code
    lines only: text inside multi-line strings is kept byte for byte)."""
    lines = template.split("\n")
    holes = [i for i, ln in enumerate(lines) if ln.strip() == HOLE_TOKEN]
    if len(holes) != 1:
        raise ValueError(f"template must have exactly one {HOLE_TOKEN} line, has {len(holes)}")
    i = holes[0]
    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
    body = dedent(body)
    in_code = jacsyntax.line_starts_in_code(body)
    new = [
        indent + ln if c and ln.strip() else ln
        for ln, c in zip(body.split("\n"), in_code, strict=True)
    ]
    return "\n".join(lines[:i] + new + lines[i + 1 :])
