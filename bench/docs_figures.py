"""The benchmark figures the docs quote, written from the benches' recorded JSON, never by hand.

A figure in a doc (docs/*.md, README.md) sits between `<!-- bench:NAME -->` and
`<!-- /bench:NAME -->`; its text is `FIGURES[NAME]` applied to bench/results/NAME.json. A bench
that records NAME.json calls `write(NAME)` right after, so the docs say what its last run
measured; tests/test_docs.py fails when a doc's figure differs from its rendering.

    .venv/bin/python bench/docs_figures.py           # rewrite every figure from the JSON
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"


def _reward_throughput(d: dict) -> str:
    ratio, n = d["throughput_ratio"], d["n"]
    same, total = d["agreement"]["same"], d["agreement"]["total"]
    return (
        f"**{ratio['set']:.1f}x** warm `jac run` with the {n['looping']} looping programs "
        f"included, **{ratio['set_nl']:.1f}x** without them, agreement {same}/{total} "
        f"(load {d['load_start'][0]:.1f} at the start)"
    )


def _grpo_step_reward(d: dict) -> str:
    r = d["reward"]
    task, fixed = r["task"], r["fixed_20s"]
    return (
        f"{r['rollouts']} rollouts with {r['looping']} that loop forever: {task['seconds']:.2f} s "
        f"with the tasks' {task['timeout_s'][0]:g} s time-outs, {fixed['seconds']:.2f} s with the "
        f"earlier fixed {fixed['timeout_s'][0]:g} s ({fixed['seconds'] / task['seconds']:.1f}x)"
    )


# NAME (bench/results/NAME.json) -> its figure's text
FIGURES: dict[str, Callable[[dict], str]] = {
    "reward_throughput": _reward_throughput,
    "grpo_step": _grpo_step_reward,
}


def docs(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def _block(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- bench:{name} -->)(.*?)(<!-- /bench:{name} -->)", re.S)


def render(name: str, results: Path = RESULTS) -> str:
    path = results / f"{name}.json"
    try:
        return FIGURES[name](json.loads(path.read_text()))
    except (OSError, ValueError, KeyError) as e:
        raise ValueError(f"{path}: cannot render figure {name!r} ({type(e).__name__}: {e})") from e


def quoted(root: Path = ROOT) -> dict[str, list[tuple[Path, str]]]:
    """{NAME: [(doc, the figure's text there)]} of every figure the docs quote."""
    out: dict[str, list[tuple[Path, str]]] = {name: [] for name in FIGURES}
    for doc in docs(root):
        text = doc.read_text()
        for name in FIGURES:
            out[name] += [(doc, m.group(2)) for m in _block(name).finditer(text)]
    return out


def write(name: str, root: Path = ROOT, results: Path = RESULTS) -> list[Path]:
    """Rewrite figure NAME wherever a doc quotes it; the docs changed."""
    text, changed = render(name, results), []
    for doc in docs(root):
        old = doc.read_text()
        new = _block(name).sub(lambda m: m.group(1) + text + m.group(3), old)
        if new != old:
            doc.write_text(new)
            changed.append(doc)
    return changed


def recorded(path: Path) -> list[Path]:
    """A bench just wrote its JSON at `path`: when that is a figure's record (bench/results/
    NAME.json), rewrite the docs that quote it; the docs changed."""
    path = Path(path).resolve()
    if path.parent != RESULTS or path.stem not in FIGURES:
        return []
    changed = write(path.stem)
    for doc in changed:
        print(f"{doc.relative_to(ROOT)}: figure {path.stem} rewritten from {path.name}")
    return changed


if __name__ == "__main__":
    for name in FIGURES:
        print(name, [str(p.relative_to(ROOT)) for p in write(name)])
