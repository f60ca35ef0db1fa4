"""What the learnable family's gen measures: a model-free rewrite of the instruction, and how much
of the holdout each rung's training tasks cover by template.

Every learnable instruction states its body's varying part literally (`learnable/README.md`), so
three regular expressions that turn the instruction's sentence into the body — with no model and
no training — are a baseline any "gen rises with N" claim must be read against. This bench scores
that rewrite with the real reward (`jacrl.ruler.reward.score_completions`, the sandboxed executor)
on the holdout and the train pool, and lists, per rung, which holdout templates (shape, and shape
with its operator combination) the rung's train tasks contain, with the holdout tasks they cover.
When committed SmolLM2 rows exist, each rung's greedy gen passes are split by whether the task's
template was covered.

    .venv/bin/python bench/learnable_baseline.py     # ~20 s; bench/results/learnable_baseline.json
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jacrl.ruler.reward import score_completions  # noqa: E402
from jacrl.tasks import splits  # noqa: E402
from jacrl.tasks.record import meta  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "learnable_baseline.json"
DATA = ROOT / "learnable" / "data"
RUNGS = ("1", "3", "10", "20", "all")
ROWS = tuple(
    ROOT / "results" / f / "rl_ladder.jsonl" for f in ("smollm2-learnable", "smollm2-grpo")
)

# the instruction's first sentence -> the body, one rule per sentence form
RULES = (
    (re.compile(r"^Return (.*?)(?: as text)?\.$"), lambda m: f"return {m[1]};"),
    (
        re.compile(r"^Try return (.*?); on (\w+) return (.*)\.$"),
        lambda m: f"try {{\n    return {m[1]};\n}} except {m[2]} {{\n    return {m[3]};\n}}",
    ),
    (
        re.compile(r"^(?:Node side: )?If (.*?), do (.*?;)( then visit \[-->\];)?$"),
        lambda m: f"if {m[1]} {{\n    {m[2]}\n}}" + ("\nvisit [-->];" if m[3] else ""),
    ),
)


def instruction(task: dict) -> str:
    """The task's instruction: the prompt's first paragraph."""
    return task["prompt"].split("\n\n", 1)[0].strip()


def rewrite(text: str) -> str | None:
    """The body the first matching rule makes of an instruction, None when no rule matches."""
    for pattern, body in RULES:
        m = pattern.match(text)
        if m:
            return body(m)
    return None


def baseline(tasks: list[dict]) -> dict:
    """The rewrite scored by the reward on `tasks`: exact passes, per shape, and the misses."""
    bodies = [rewrite(instruction(t)) for t in tasks]
    completions = [f"```jac\n{b}\n```" if b is not None else "" for b in bodies]
    scored = score_completions(completions, [t["answer"] for t in tasks])
    per_shape: dict[str, list[int]] = {}
    for t, s in zip(tasks, scored, strict=True):
        c = per_shape.setdefault(shape_of(t), [0, 0])
        c[0] += s.exact
        c[1] += 1
    return {
        "exact": sum(s.exact for s in scored),
        "tasks": len(tasks),
        "unmatched": sum(b is None for b in bodies),
        "per_shape": per_shape,
        "misses": [meta(t)["id"] for t, s in zip(tasks, scored, strict=True) if not s.exact],
    }


def shape_of(task: dict) -> str:
    """lib_arith_007 -> lib_arith."""
    return meta(task)["id"].rsplit("_", 1)[0]


def coverage(pool: list[dict], holdout: list[dict], manifest: dict[str, dict]) -> dict:
    """Per rung: the shapes and (shape, combination) templates of its train tasks, and how many
    holdout tasks have their shape, and their template, among them."""
    out = {}
    for rung in RUNGS:
        train = splits.rung_tasks(pool, rung)
        shapes = {shape_of(t) for t in train}
        templates = {(shape_of(t), manifest[meta(t)["id"]]["combo"]) for t in train}
        out[rung] = {
            "train_tasks": len(train),
            "shapes": len(shapes),
            "templates": len(templates),
            "holdout_shape_covered": sum(shape_of(t) in shapes for t in holdout),
            "holdout_template_covered": sum(
                (shape_of(t), manifest[meta(t)["id"]]["combo"]) in templates for t in holdout
            ),
            "covered_shapes": sorted(shapes),
        }
    return out


def passes_by_coverage(cov: dict, holdout: list[dict]) -> dict:
    """From the committed SmolLM2 learnable rows (the first ladder's and `make real-grpo`'s): each
    cell's greedy gen passes, split by whether the task's shape was among the rung's train
    shapes (GRPO's prompts beyond the rung hold every shape: a pass where SFT showed none is
    learned from the reward)."""
    shape = {meta(t)["id"]: shape_of(t) for t in holdout}
    out = {}
    lines = [ln for f in ROWS if f.is_file() for ln in f.read_text().splitlines()]
    for line in lines:
        row = json.loads(line)
        if row.get("kind") != "gen" or row["rung"] not in cov:
            continue
        covered = set(cov[row["rung"]]["covered_shapes"])
        split = {"covered": [0, 0], "not covered": [0, 0]}
        for p in row["per_task"]:
            c = split["covered" if shape[p["id"]] in covered else "not covered"]
            c[0] += bool(p["greedy_exact"])
            c[1] += 1
        seed = f"/s{row['train_seed']}" if row.get("train_seed") else ""
        name = f"{row['rung']}/{row['condition']}{seed} ({row['tasks']} gen tasks)"
        out[name] = split
    return out


def main() -> int:
    t0 = time.time()
    load = os.getloadavg()
    pool = splits.load_split("trainpool", DATA)
    holdout = splits.load_split("holdout", DATA)
    manifest = {
        d["id"]: d
        for d in map(json.loads, (ROOT / "learnable" / "manifest.jsonl").read_text().splitlines())
    }
    cov = coverage(pool, holdout, manifest)
    record = {
        "rules": len(RULES),
        "holdout": baseline(holdout),
        "trainpool": baseline(pool),
        "coverage": cov,
        "smollm2_passes_by_coverage": passes_by_coverage(cov, holdout),
        "seconds": round(time.time() - t0, 1),
        "load_start": [round(x, 2) for x in load],
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(record, indent=1) + "\n")
    h, p = record["holdout"], record["trainpool"]
    print(
        f"rewrite baseline: holdout {h['exact']}/{h['tasks']}, train pool "
        f"{p['exact']}/{p['tasks']} ({len(RULES)} rules, no model)"
    )
    for rung, c in cov.items():
        print(
            f"rung {rung}: {c['shapes']} shapes, {c['templates']} templates; holdout covered "
            f"by shape {c['holdout_shape_covered']}/64, "
            f"by template {c['holdout_template_covered']}/64"
        )
    from docs_figures import recorded

    recorded(RESULTS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
