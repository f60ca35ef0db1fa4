"""Parse a driver (`*.jac`, one HOLE region): the markers, the unit that holds them, the gold body.

This is the driver *format*, the one the earlier harness used, accepted whole:

* the open marker is a comment line `# >>>HOLE id="<ID>" instruction="<TEXT>"`; the id is any run of
  non-`"` characters and the instruction is greedy to the last `"` of the line (so it may hold
  inner quotes); backslashes stay as written (`\\"0\\"` reaches the prompt as `\\"0\\"`); text after
  the last quote is ignored. The close marker is a comment line holding `<<<HOLE`.
* any header: a `# Source: <where>` line, or a module docstring with an `Origin: <path>.jac` line,
  or neither (then the source is `unknown`);
* any `<family>_` id prefix (optionally renamed through a family map), and an id that need not be
  the file name.

What *our* corpus additionally requires (a Source line, our family list, id = file name, the mix
of families and sources) is a separate check, `jacrl.tasks.corpus`.

The hole's unit is found here, once, from the marker's position in the real driver (string- and
comment-aware brace nesting), and stored with the task, so extraction never guesses it from a
template with a regex (the earlier harness's name regex picked words out of string literals).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path

from jacrl.ruler import jacsyntax

OPEN = re.compile(
    r'^(?P<indent>[ \t]*)#\s*>>>HOLE\s+id="(?P<id>[^"]+)"'
    r'\s+instruction="(?P<instr>.*)"'
)  # greedy: to the line's last quote
CLOSE = re.compile(r"^[ \t]*#\s*<<<HOLE")
SOURCE = re.compile(r"^#[ \t]*Source:[ \t]*(\S+)[ \t]*$", re.M)
ORIGIN = re.compile(r"Origin:\s+(\S+?\.jac)")  # the shortest non-space run ending in .jac
UNKNOWN_SOURCE = "unknown"
HOLE_TOKEN = "__HOLE__"
TODO_LINE = "# TODO: write the body for this unit"
HOLE_KINDS = ("def", "can", "impl")


class DriverError(ValueError):
    """A malformed driver; the message is one line `path:line: reason`."""


@dataclasses.dataclass(frozen=True)
class Unit:
    """The unit whose body holds the hole."""

    kind: str  # def | can | impl
    name: str
    signature: str  # header text up to the `{`, whitespace collapsed
    containers: tuple[str, ...]  # names of enclosing archetypes, outermost first ("Account",)
    before: str  # body lines before the hole (non-empty only for a partial-body hole)
    after: str  # body lines after the hole

    @property
    def partial(self) -> bool:
        return bool(self.before.strip() or self.after.strip())

    def to_json(self) -> dict:
        return dataclasses.asdict(self) | {"containers": list(self.containers)}

    @classmethod
    def from_json(cls, d: dict) -> Unit:
        return cls(**(d | {"containers": tuple(d["containers"])}))


@dataclasses.dataclass(frozen=True)
class Driver:
    path: str
    id: str
    family: str  # the id's prefix before the first `_`, renamed by the family map if it names it
    source: str  # from `# Source:`, else from `Origin:`, else "unknown"
    instruction: str  # as written between the quotes: inner quotes and backslashes kept
    indent: str  # indentation of the hole
    gold: str  # the marked lines, original indentation, no trailing newline
    template: str  # the driver with the marked region replaced by `indent + __HOLE__`
    prompt_view: str  # the same with `indent + # TODO: ...` instead (what the prompt shows)
    unit: Unit
    hole_line: int  # 1-based line of the open marker
    text: str


def _fail(path: str, line: int, why: str) -> DriverError:
    return DriverError(f"{path}:{line}: {why}")


def source_of(text: str) -> str:
    """`# Source: X` (first such line) -> X; else the first `Origin: <path>.jac`; else unknown."""
    m = SOURCE.search(text) or ORIGIN.search(text)
    return m.group(1) if m else UNKNOWN_SOURCE


def family_of(tid: str, family_map: Mapping[str, str] | None = None) -> str:
    """The id's prefix before the first underscore, renamed when the map names it."""
    prefix = tid.split("_", 1)[0]
    return (family_map or {}).get(prefix, prefix)


def parse_family_map(spec: str | Path | None) -> dict[str, str]:
    """`sg=osp,gb=osp` or a file of such pairs (commas or newlines; `#` starts a comment) ->
    {"sg": "osp", "gb": "osp"}. None or "" -> {}."""
    if not spec:
        return {}
    where = str(spec)
    text = where
    if Path(where).is_file():
        text = "\n".join(ln.split("#", 1)[0] for ln in Path(where).read_text().splitlines())
    out: dict[str, str] = {}
    for pair in (x.strip() for x in re.split(r"[,\n]", text)):
        if not pair:
            continue
        old, eq, new = (x.strip() for x in pair.partition("="))
        if not (eq and old and new) or not re.fullmatch(r"\w+", old + new):
            raise ValueError(f"family map {where!r}: {pair!r} is not PREFIX=FAMILY (e.g. sg=osp)")
        out[old] = new
    return out


def parse_driver(
    path: str | Path, text: str | None = None, family_map: Mapping[str, str] | None = None
) -> Driver:
    """The driver at `path` (its `text` if given). A malformed one raises DriverError."""
    path = str(path)
    text = Path(path).read_text() if text is None else text
    lines = text.split("\n")
    opens = [i for i, ln in enumerate(lines) if ">>>HOLE" in ln]
    closes = [i for i, ln in enumerate(lines) if "<<<HOLE" in ln and ">>>HOLE" not in ln]
    if len(opens) != 1:
        raise _fail(
            path,
            (opens[1] + 1) if opens else 1,
            f"expected exactly one '>>>HOLE' marker, found {len(opens)}",
        )
    start = opens[0]
    if len(closes) != 1:
        raise _fail(
            path,
            (closes[1] + 1) if closes else start + 1,
            f"expected exactly one '<<<HOLE' marker, found {len(closes)}",
        )
    end = closes[0]
    m = OPEN.match(lines[start])
    if not m:
        raise _fail(path, start + 1, 'bad marker, want: # >>>HOLE id="..." instruction="..."')
    if not CLOSE.match(lines[end]):
        raise _fail(path, end + 1, "bad close marker, want: # <<<HOLE")
    if end <= start + 1 or not "\n".join(lines[start + 1 : end]).strip():
        raise _fail(path, start + 1, "the hole is empty")
    tid, instruction, indent = m.group("id"), m.group("instr"), m.group("indent")
    if not instruction.strip():
        raise _fail(path, start + 1, "empty instruction")

    unit = _find_unit(path, text, lines, start, end)
    gold = "\n".join(lines[start + 1 : end])
    template = "\n".join(lines[:start] + [indent + HOLE_TOKEN] + lines[end + 1 :])
    view = "\n".join(lines[:start] + [indent + TODO_LINE] + lines[end + 1 :])
    return Driver(
        path=path,
        id=tid,
        family=family_of(tid, family_map),
        source=source_of(text),
        instruction=instruction,
        indent=indent,
        gold=gold,
        template=template,
        prompt_view=view,
        unit=unit,
        hole_line=start + 1,
        text=text,
    )


def _offset(lines: list[str], i: int) -> int:
    return sum(len(ln) + 1 for ln in lines[:i])


def _find_unit(path: str, text: str, lines: list[str], start: int, end: int) -> Unit:
    mask = jacsyntax.code_mask(text)
    pos = _offset(lines, start)
    if mask[pos : pos + len(lines[start])].strip():
        raise _fail(path, start + 1, "the HOLE marker must be a comment line of its own")
    by_brace = {h.brace: h for h in jacsyntax.headers(text, mask)}
    # the innermost enclosing unit; blocks of if/for/while between it and the hole are fine
    chain = [by_brace[b] for b in jacsyntax.enclosing(mask, pos) if b in by_brace]
    if not chain:
        raise _fail(path, start + 1, "the hole is not inside a unit's body")
    head = chain[-1]
    if head.kind not in HOLE_KINDS:
        raise _fail(path, start + 1, f"the hole's unit is a {head.kind!r}; want def, can or impl")
    close = jacsyntax.match_brace(mask, head.brace)
    end_pos = _offset(lines, end)
    if close is None or close < end_pos:
        raise _fail(path, end + 1, "the '<<<HOLE' marker is not inside the same unit")
    body_first = text.count("\n", 0, head.brace) + 1  # first line after the `{` line
    body_last = text.count("\n", 0, close)  # the line holding the closing `}`
    before = "\n".join(lines[body_first:start])
    after = "\n".join(lines[end + 1 : body_last])
    containers = tuple(h.name for h in chain[:-1])
    return Unit(
        kind=head.kind,
        name=head.name,
        signature=head.signature,
        containers=containers,
        before=before,
        after=after,
    )
