"""The README and docs/ as a reader meets them: every relative link (and #anchor) resolves on
GitHub, every page has its table of contents, the README stays short, and every command block
is either run by a named test (or CI script) or marked as an illustration."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```(\w*)", re.M)
MARK = re.compile(r"<!-- (illustration|tested: (\S+)) -->\s*$")
COMMANDS = ("bash", "sh", "shell", "console")  # fences that show commands to type
PLACEHOLDERS = {
    "threat-model.md",
    "mutation.md",
    "grpo-dynamic-sampling.md",
    "quantized-models.md",
}  # written by other issues' pages; linked, not checked here


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (an underscore inside a word
    is kept, as GitHub keeps it; one that marks emphasis is not), spaces to hyphens."""
    text = re.sub(r"(?<!\w)_([^_]+)_(?!\w)", r"\1", heading)
    text = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", text)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    return {anchor(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


# a document cited by its path in code spans (`../notes/x.md`, `/abs/y.md`), not as a link
CITED = re.compile(r"`((?:\.\.?/|/)[^`\s]+\.md)`")


def outside_links(page: Path, root: Path = ROOT) -> list[str]:
    """The page's relative links and cited documents that lead to no file inside the repository
    (a path above its root, an absolute path: a reader's clone has neither), or to a missing
    heading."""
    bad = []
    text = page.read_text()
    for target in LINK.findall(text) + CITED.findall(text):
        if re.match(r"[a-z]+:", target):  # http(s), mailto: not ours to check offline
            continue
        path, _, frag = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if path.startswith("/") or not dest.is_relative_to(root):
            bad.append(f"{target}: outside the repository")
        elif not dest.exists():
            bad.append(f"{target}: no such file")
        elif frag and dest.suffix == ".md" and frag not in anchors(dest):
            bad.append(f"{target}: no heading #{frag} in {dest.name}")
    return bad


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_relative_link_resolves_inside_the_repository(page):
    assert outside_links(page) == [], f"{rel(page)}: " + "; ".join(outside_links(page))


def test_the_readme_is_short_and_links_every_page():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    for page in PAGES[1:]:
        assert f"docs/{page.name}" in text, page.name


@pytest.mark.parametrize("page", [p for p in PAGES[1:] if p.name not in PLACEHOLDERS], ids=rel)
def test_each_page_has_its_contents_and_the_way_back(page):
    text = page.read_text()
    assert "**Contents**" in text and "](../README.md)" in text
    listed = re.findall(r"^- \[[^\]]+\]\(#([^)]+)\)", text, re.M)
    assert listed and set(listed) <= anchors(page)


def _command_blocks(page: Path):
    lines = page.read_text().splitlines()
    inside = False
    for i, line in enumerate(lines):
        m = FENCE.match(line)
        if not m:
            continue
        if not inside and m.group(1) in COMMANDS:
            yield i + 1, lines[i - 1] if i else ""
        inside = not inside


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_command_block_is_tested_or_an_illustration(page):
    """The line above each command block says which: `<!-- tested: FILE[::TEST] -->` names a test
    (or CI script) that must exist, `<!-- illustration -->` one that no test runs."""
    bad = []
    for lineno, above in _command_blocks(page):
        m = MARK.search(above)
        if not m:
            bad.append(f"{rel(page)}:{lineno}: a command block with no tested/illustration mark")
            continue
        if m.group(2):
            file, _, test = m.group(2).partition("::")
            if not (ROOT / file).is_file():
                bad.append(f"{rel(page)}:{lineno}: {file} does not exist")
            elif test and not re.search(
                rf"^def {re.escape(test)}\(", (ROOT / file).read_text(), re.M
            ):
                bad.append(f"{rel(page)}:{lineno}: no test {test} in {file}")
    assert bad == []


def test_the_checker_catches_a_broken_link_and_an_unmarked_block(tmp_path):
    page = tmp_path / "x.md"
    page.write_text("# Top\n\n[gone](nowhere.md) [top](#top) [bad](#nope)\n\n```bash\nls\n```\n")
    found = [t for t in LINK.findall(page.read_text())]
    assert found == ["nowhere.md", "#top", "#nope"]
    assert anchors(page) == {"top"}
    assert [above for _, above in _command_blocks(page)] == [""]
    assert anchor("GRPO with mlx-lm-lora's own CLI") == "grpo-with-mlx-lm-loras-own-cli"
    # links and cited documents that leave the repository, though the files exist
    (tmp_path / "repo" / "docs").mkdir(parents=True)
    (tmp_path / "notes.md").write_text("# Notes\n")
    (tmp_path / "repo" / "README.md").write_text("# Readme\n")
    doc = tmp_path / "repo" / "docs" / "d.md"
    doc.write_text(
        f"[in](../README.md#readme) [up](../../notes.md) `../../notes.md` `{tmp_path}/notes.md`\n"
    )
    assert outside_links(doc, tmp_path / "repo") == [
        "../../notes.md: outside the repository",
        "../../notes.md: outside the repository",
        f"{tmp_path}/notes.md: outside the repository",
    ]


def test_generated_regions_match_their_recorded_runs(tmp_path):
    """docs/real-model.md's ladder tables are what the committed rows render now (the benches'
    figures: the next test)."""
    from jacrl.doc_regions import read_region, write_region
    from jacrl.report.markdown import regions

    doc = ROOT / "docs" / "real-model.md"
    folders = {
        "smollm2": "smollm2",
        "smollm2-learnable": "smollm2-learnable",
        "smollm2-grpo": "smollm2-grpo",
        "smollm2-main-grpo": "smollm2-main-grpo",
        "grpo-probe-rung": "smollm2-grpo-probe/rung",
        "grpo-probe-beyond": "smollm2-grpo-probe/beyond",
        "demo-smollm2-135m": "demo-smollm2-135m",
    }
    checked = 0
    for page in (doc, ROOT / "docs" / "results.md"):
        present = set(re.findall(r"<!-- generated:([\w-]+) -->", page.read_text()))
        ours = 0
        for name, folder in folders.items():
            for suffix, text in regions(ROOT / "results" / folder).items():
                if f"{name}-{suffix}" in present:
                    assert read_region(page, f"{name}-{suffix}") == text, f"{name}-{suffix}: rerun"
                    ours += 1
        # every ladder region of the page is one of these (the others are the benches')
        assert ours == len([r for r in present if r.split("-")[0] in ("smollm2", "grpo", "demo")])
        checked += ours
    assert checked >= 20
    # the checker can fail: a hand edit inside a region differs from its render
    copy = tmp_path / "d.md"
    copy.write_text(doc.read_text())
    write_region(copy, "smollm2-pivot", "| hand | typed |\n")
    assert read_region(copy, "smollm2-pivot") != regions(ROOT / "results" / "smollm2")["pivot"]
    with pytest.raises(ValueError, match="no region"):
        write_region(copy, "nope", "x\n")


def _docs_figures():
    """bench/docs_figures.py, imported by path (bench/ is scripts, not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("docs_figures", ROOT / "bench/docs_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_benchmark_figure_quoted_is_its_benchs_last_recorded_run(tmp_path):
    """A figure in a generated region of the README or docs/ reads as its rendering from the
    bench's latest JSON in bench/results (`bench/docs_figures.py`), and every figure the
    renderer knows is quoted somewhere; a recorded run with another figure rewrites it."""
    figures = _docs_figures()
    for name, places in figures.quoted().items():
        assert places, f"no doc quotes figure {name}"
        want = figures.render(name)
        for doc, text in places:
            assert text == want, f"{doc.relative_to(ROOT)}: figure {name} is not its last run"
    (tmp_path / "docs").mkdir()
    start, end = "<!-- generated:grpo_step -->", "<!-- /generated:grpo_step -->"
    (tmp_path / "README.md").write_text(f"x {start}1.0x{end}, a block:\n{start}\n2x\n{end}\n")
    (tmp_path / "docs" / "a.md").write_text("none here")
    assert figures.write("grpo_step", tmp_path) == [tmp_path / "README.md"]
    want = figures.render("grpo_step")
    assert figures.quoted(tmp_path)["grpo_step"] == [
        (tmp_path / "README.md", want),
        (tmp_path / "README.md", want + "\n"),
    ]
    assert figures.write("grpo_step", tmp_path) == []  # nothing left to change


def test_the_speed_figure_shows_an_evaluations_paths_and_the_goal_only_when_measured():
    """real_model_speed's figure: a record from before the evaluation was timed renders without
    its rows; one with it lists each model's per-chunk, batched and (when measured) split times,
    the decode phase's own times and rate where recorded, and says each goal MET only when every
    real model's faster path reaches it: >= 3x faster than per-chunk, and >= 150 tok/s of decode
    (all tokens over the slowest worker's decode phase; a record without phases: the whole
    generation wall)."""
    figures = _docs_figures()
    record = json.loads((ROOT / "bench/results/real_model_speed.json").read_text())
    for m in record["models"]:
        m.pop("evaluation", None)
    assert "An evaluation's generation" not in figures.FIGURES["real_model_speed"](record)

    def evaluation(old_s: float, new_s: float, tokens: int, split_s: float = 0.0) -> dict:
        split = split_s and {
            "split": {
                "workers": 2,
                "s": split_s,
                "tokens": tokens,
                "tok_s": tokens / split_s,
                "per_worker": [
                    {"load_s": 3.0, "prefill_s": 20.0, "decode_s": 30.0, "tokens": tokens // 2},
                    {"load_s": 3.0, "prefill_s": 22.0, "decode_s": 32.0, "tokens": tokens // 2},
                ],
                "decode_tok_s": 310.0,
                "decode_tok_s_slowest": 300.0,
            },
            "split_speedup": round(old_s / split_s, 2),
            "split_greedy_same": 11,
        }
        return {
            "tasks": 12,
            "n": 4,
            "batch_size": 32,
            "budget_factor": 1.5,
            "budget_tokens": 2106,
            "per_chunk": {"s": old_s, "tokens": tokens, "tok_s": round(tokens / old_s, 1)},
            "batched": {"s": new_s, "tokens": tokens, "tok_s": round(tokens / new_s, 1)},
            "speedup": round(old_s / new_s, 2),
            "greedy_same": 12,
            **(split or {}),
        }

    real = next(m for m in record["models"] if "decode_tok_s" in m and m["model"] != "jac-tiny")
    real["evaluation"] = evaluation(300.0, 60.0, 9600)  # 5x, 160 tok/s, no phases recorded
    text = figures.FIGURES["real_model_speed"](record)
    row = f"| {real['model']} | 300.0 | 60.0 | · | 5.0x / · | 32.0 | 160.0 | · | · | · / · |"
    assert row + " 12/12 |" in text
    assert text.rstrip().endswith(
        "per-chunk: MET (best path: 5.0x); decode inside it >= 150 tok/s: MET (the conservative "
        "figure, all tokens over the slowest worker's decode phase: 160.0 tok/s)."
    )
    real["evaluation"] = evaluation(300.0, 120.0, 9600, 60.0)  # split: 5x, decode 300 tok/s
    real["evaluation"]["batched"].update(prefill_s=40.0, decode_s=80.0, decode_tok_s=120.0)
    text = figures.FIGURES["real_model_speed"](record)
    assert "split (2 worker processes of one BLAS thread" in text
    row = f"| {real['model']} | 300.0 | 120.0 | 60.0 | 2.5x / 5.0x | 32.0 | 80.0 | 160.0 |"
    phases = " 40.0 / 80.0; 20.0 / 30.0, 22.0 / 32.0 | 120.0 / 310.0 (300.0) |"
    assert row + phases + " 12/12, 11/12 |" in text
    assert "MET (best path: 5.0x); decode inside it >= 150 tok/s: MET" in text
    assert text.rstrip().endswith("decode phase: 300.0 tok/s).")
    real["evaluation"] = evaluation(300.0, 200.0, 9600, 150.0)  # split 2x, decode 300 tok/s
    text = figures.FIGURES["real_model_speed"](record)
    assert "faster than per-chunk: NOT met (best path: 2.0x); decode inside it" in text
    assert "150 tok/s: MET" in text
    real["evaluation"] = evaluation(300.0, 120.0, 9600)  # 2.5x, 80 tok/s
    text = figures.FIGURES["real_model_speed"](record).rstrip()
    assert "NOT met (best path: 2.5x); decode inside it >= 150 tok/s: NOT met" in text
    assert text.endswith("phase: 80.0 tok/s).")
