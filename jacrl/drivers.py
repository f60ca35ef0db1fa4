"""Parse a driver (`drivers/*.jac`): the HOLE markers, the unit that contains them, the gold body.

The hole's unit is found here, once, from the marker's position in the real driver (string- and
comment-aware brace nesting), and stored with the task, so extraction never guesses it from a
template with a regex (the reference harness's name regex picked words out of string literals).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from jacrl import jacsyntax

OPEN = re.compile(r'^(?P<indent>[ \t]*)#\s*>>>HOLE\s+id="(?P<id>[^"]+)"\s+instruction="(?P<instr>.*)"\s*$')
CLOSE = re.compile(r"^[ \t]*#\s*<<<HOLE\s*$")
SOURCE = re.compile(r"^#\s*Source:\s*(\S+)\s*$")
HOLE_TOKEN = "__HOLE__"
TODO_LINE = "# TODO: write the body for this unit"
FAMILIES = ("osp", "lib", "syn", "arch", "text", "err")
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
    family: str
    source: str
    instruction: str
    indent: str  # indentation of the hole
    gold: str  # the marked lines, original indentation, no trailing newline
    template: str  # the driver with the marked region replaced by `indent + __HOLE__`
    unit: Unit
    hole_line: int  # 1-based line of the open marker
    text: str

    @property
    def prompt_view(self) -> str:
        return self.template.replace(self.indent + HOLE_TOKEN, self.indent + TODO_LINE, 1)


def _fail(path: str, line: int, why: str) -> DriverError:
    return DriverError(f"{path}:{line}: {why}")


def parse_driver(path: str | Path, text: str | None = None) -> Driver:
    path = str(path)
    text = Path(path).read_text() if text is None else text
    lines = text.split("\n")
    opens = [i for i, ln in enumerate(lines) if ">>>HOLE" in ln]
    closes = [i for i, ln in enumerate(lines) if "<<<HOLE" in ln]
    if len(opens) != 1:
        raise _fail(path, (opens[1] + 1) if opens else 1,
                    f"expected exactly one '>>>HOLE' marker, found {len(opens)}")
    start = opens[0]
    if len(closes) != 1:
        raise _fail(path, (closes[1] + 1) if closes else start + 1,
                    f"expected exactly one '<<<HOLE' marker, found {len(closes)}")
    end = closes[0]
    m = OPEN.match(lines[start])
    if not m:
        raise _fail(path, start + 1, 'bad marker, want: # >>>HOLE id="..." instruction="..."')
    if not CLOSE.match(lines[end]):
        raise _fail(path, end + 1, "bad close marker, want: # <<<HOLE")
    if end <= start + 1 or not "\n".join(lines[start + 1:end]).strip():
        raise _fail(path, start + 1, "the hole is empty")
    tid, instruction, indent = m.group("id"), m.group("instr").strip(), m.group("indent")
    if '"' in instruction:
        raise _fail(path, start + 1, "instruction must not contain double quotes")
    if not instruction:
        raise _fail(path, start + 1, "empty instruction")
    family = tid.split("_", 1)[0]
    if family not in FAMILIES:
        raise _fail(path, start + 1, f"id {tid!r}: family prefix must be one of {FAMILIES}")
    if Path(path).suffix == ".jac" and Path(path).stem != tid:
        raise _fail(path, start + 1, f"id {tid!r} does not match the file name")
    sm = SOURCE.match(lines[0])
    if not sm:
        raise _fail(path, 1, "first line must be '# Source: apps/<app>'")

    unit = _find_unit(path, text, lines, start, end)
    gold = "\n".join(lines[start + 1:end])
    template = "\n".join(lines[:start] + [indent + HOLE_TOKEN] + lines[end + 1:])
    return Driver(path=path, id=tid, family=family, source=sm.group(1), instruction=instruction,
                  indent=indent, gold=gold, template=template, unit=unit, hole_line=start + 1,
                  text=text)


def _offset(lines: list[str], i: int) -> int:
    return sum(len(ln) + 1 for ln in lines[:i])


def _find_unit(path: str, text: str, lines: list[str], start: int, end: int) -> Unit:
    mask = jacsyntax.code_mask(text)
    pos = _offset(lines, start)
    if mask[pos:pos + len(lines[start])].strip():
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
    after = "\n".join(lines[end + 1:body_last])
    containers = tuple(h.name for h in chain[:-1])
    return Unit(kind=head.kind, name=head.name, signature=head.signature, containers=containers,
                before=before, after=after)


def load_drivers(directory: str | Path) -> list[Driver]:
    """Every `*.jac` in `directory`, in sorted path order."""
    return [parse_driver(p) for p in sorted(Path(directory).glob("*.jac")) if p.is_file()]
