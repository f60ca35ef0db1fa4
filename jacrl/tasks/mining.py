"""Mine a tree of .jac files: an inventory of units, and hole candidates from runnable programs.

Default tree: the .jac sources bundled with the installed jaclang package. Any path works (e.g. a
clone of a Jac app). Candidates are proposed only from programs that run deterministically: one
unit body is blanked at a time, and a candidate is kept when the program with the gold body runs and
the output changes when the body is emptied. Candidates are written as draft drivers to review.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pandas as pd

from jacrl.executor import Executor
from jacrl.ruler import jacsyntax

# per unit: one column per idiom marker (jacsyntax.IDIOMS, counted on code only), and the
# non-OSP language features worth knowing about when choosing holes
FEATURES = {"match": r"\bmatch\b", "try": r"\btry\b", "lambda": r"\blambda\b"}
USE_COLUMNS = [*(m.strip() for m in jacsyntax.IDIOMS), *FEATURES]
MINED_KINDS = ("def", "can", "walker", "node", "obj", "edge", "impl")
HOLE_KINDS = ("def", "can", "impl")


def default_tree() -> Path:
    import jaclang

    return Path(jaclang.__file__).resolve().parent


@dataclasses.dataclass(frozen=True)
class UnitInfo:
    file: str
    kind: str
    name: str
    containers: str
    line: int
    lines: int  # body lines
    body_start: int  # offset just past the `{`
    body_end: int  # offset of the closing `}`


def units(text: str, file: str = "") -> list[UnitInfo]:
    mask = jacsyntax.code_mask(text)
    heads = jacsyntax.headers(text, mask)
    by_brace = {h.brace: h for h in heads}
    closes = jacsyntax.brace_map(mask)
    chains = jacsyntax.enclosing_many(mask, [h.start for h in heads])
    found = []
    for h, chain in zip(heads, chains, strict=True):
        close = closes.get(h.brace)
        if h.kind not in MINED_KINDS or close is None:
            continue
        containers = "/".join(by_brace[b].name for b in chain if b in by_brace)
        found.append(
            UnitInfo(
                file,
                h.kind,
                h.name,
                containers,
                text.count("\n", 0, h.start) + 1,
                text.count("\n", h.brace, close),
                h.brace + 1,
                close,
            )
        )
    return found


def inventory(tree: str | Path | None = None, progress: bool = False) -> pd.DataFrame:
    """One row per unit: file, kind, name, containers, line, body lines, idiom counts.
    progress: a progress bar over the files on stderr."""
    from tqdm.auto import tqdm

    tree = Path(tree) if tree else default_tree()
    if not tree.is_dir():
        raise FileNotFoundError(f"{tree}: no such folder")
    rows = []
    for path in tqdm(
        sorted(tree.rglob("*.jac")), desc="inventory", unit="file", disable=not progress
    ):
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        rel = str(path.relative_to(tree))
        for u in units(text, rel):
            body = jacsyntax.code_mask(text[u.body_start : u.body_end])
            row = dataclasses.asdict(u)
            del row["body_start"], row["body_end"]
            row.update({m.strip(): body.count(m) for m in jacsyntax.IDIOMS})
            row.update({k: len(re.findall(p, body)) for k, p in FEATURES.items()})
            rows.append(row)
    cols = ["file", "kind", "name", "containers", "line", "lines", *USE_COLUMNS]
    return pd.DataFrame(rows, columns=cols)


@dataclasses.dataclass
class Candidate:
    file: str
    kind: str
    name: str
    line: int
    body_lines: int
    draft: str  # a driver to review: HOLE markers around the unit's body


def _with_empty_body(text: str, u: UnitInfo) -> str:
    return text[: u.body_start] + "\n" + text[u.body_end :]


def _draft(text: str, u: UnitInfo, rel: str, hole_id: str) -> str:
    body = text[u.body_start : u.body_end].strip("\n").rstrip()
    first = next((ln for ln in body.split("\n") if ln.strip()), "")
    indent = first[: len(first) - len(first.lstrip())] or "    "
    line_start = text.rfind("\n", 0, u.body_end) + 1
    close_indent = (
        text[line_start : u.body_end] if not text[line_start : u.body_end].strip() else ""
    )
    return (
        f"# Source: mined/{rel}\n"
        + text[: u.body_start]
        + "\n"
        + f'{indent}# >>>HOLE id="{hole_id}" instruction="TODO: describe what {u.name} does"\n'
        + body
        + f"\n{indent}# <<<HOLE\n"
        + close_indent
        + text[u.body_end :]
    )


CHUNK = 16  # files run per batch: a progress step, while the fork server stays busy


def candidates(
    tree: str | Path | None = None,
    *,
    max_files: int = 200,
    timeout: float = 10.0,
    executor: Executor | None = None,
    progress: bool = False,
) -> list[Candidate]:
    """Hole candidates from the tree's runnable, deterministic programs (files with an entry).
    progress: a progress bar over the files on stderr."""
    from tqdm.auto import tqdm

    tree = Path(tree) if tree else default_tree()
    files = [
        p for p in sorted(tree.rglob("*.jac")) if "with entry" in p.read_text(errors="replace")
    ][:max_files]
    own = executor is None
    ex = executor or Executor()
    try:
        out: list[Candidate] = []
        with tqdm(total=len(files), desc="mine", unit="file", disable=not progress) as bar:
            for i in range(0, len(files), CHUNK):
                part = files[i : i + CHUNK]
                texts = [p.read_text(errors="replace") for p in part]
                first = ex.run_many(texts, timeout=timeout)
                second = ex.run_many([t + "\n" for t in texts], timeout=timeout)  # uncached
                for path, text, a, b in zip(part, texts, first, second, strict=True):
                    out += _file_candidates(ex, tree, path, text, a, b, timeout)
                bar.update(len(part))
        return out
    finally:
        if own:
            ex.close()


def _file_candidates(
    ex: Executor, tree: Path, path: Path, text: str, a, b, timeout: float
) -> list[Candidate]:
    """The units of one file whose body matters to its (deterministic) output."""
    if not (a.ran and a.stdout.strip() and a.stdout == b.stdout):
        return []
    rel = str(path.relative_to(tree))
    cands = [u for u in units(text, rel) if u.kind in HOLE_KINDS and u.lines >= 2]
    emptied = ex.run_many([_with_empty_body(text, u) for u in cands], timeout=timeout)
    out = []
    for u, v in zip(cands, emptied, strict=True):
        if v.ran and v.stdout == a.stdout:
            continue  # the body does not matter to the output
        # a guessed family prefix, to be reviewed with the instruction
        family = {"can": "osp", "impl": "arch"}.get(u.kind, "lib")
        hole_id = f"{family}_mined_" + re.sub(r"\W+", "_", f"{path.stem}_{u.name}").lower()
        out.append(Candidate(rel, u.kind, u.name, u.line, u.lines, _draft(text, u, rel, hole_id)))
    return out


def write_drafts(cands: list[Candidate], out_dir: str | Path) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for c in cands:
        hole_id = re.search(r'id="([^"]+)"', c.draft).group(1)
        p = out / f"{hole_id}.jac"
        p.write_text(c.draft)
        paths.append(p)
    return paths
