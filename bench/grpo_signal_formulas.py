"""How much learning signal a GRPO run's own rollouts carry under each reward formula.

GRPO learns only from groups whose rewards differ by at least `min_group_span`. Which groups do
depends on the formula: `dependent` (the default) pays a wrong answer that compiles 0.25 x its
similarity to the gold body plus 0.55 x the share of hole-dependent output lines it matched, so
at the floor (nothing exact, little output right) a group's rewards differ by a few hundredths;
`tiered` pays compiling 0.20 outright. This re-scores every rollout of a run's rollouts.jsonl
under each formula (one sandboxed run per distinct program: the executor's cache serves the
second formula) and counts, per formula and span, the steps whose group had signal and the mean
span. The run itself trained on one formula; the others are what its groups would have said.

    .venv/bin/python bench/grpo_signal_formulas.py ROLLOUTS.jsonl [--tasks data/tasks.jsonl]
        [--spans 0.1,0.02] [--label TEXT] [--json bench/results/grpo_signal_formulas.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from docs_figures import recorded  # noqa: E402  (bench/, the script's own folder)

from jacrl.executor import Executor  # noqa: E402
from jacrl.ruler.reward import FORMULAS, score_completions  # noqa: E402
from jacrl.tasks.record import prompt_answer, read_tasks, task_id  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    ap.add_argument("rollouts", type=Path)
    ap.add_argument("--spans", default="0.1,0.02")
    ap.add_argument("--tasks", type=Path, default=ROOT / "data" / "tasks.jsonl")
    ap.add_argument("--label", default="", help="what run the rollouts are (shown in the docs)")
    ap.add_argument("--json", default=str(ROOT / "bench" / "results" / "grpo_signal_formulas.json"))
    args = ap.parse_args()
    spans = [float(x) for x in args.spans.split(",")]

    rows = [json.loads(x) for x in args.rollouts.read_text().splitlines()]
    rows = [r for r in rows if not r.get("discarded")]
    answers = {task_id(t): prompt_answer(t)["answer"] for t in read_tasks(args.tasks)}
    missing = sorted({r["task_id"] for r in rows} - answers.keys())
    if missing:
        raise SystemExit(f"{args.rollouts}: tasks not in {args.tasks}: {missing[:5]}")
    texts = [r["completion"] for r in rows]
    refs = [answers[r["task_id"]] for r in rows]
    executor = Executor()
    table = []
    for formula in FORMULAS:
        scores = [
            s.score for s in score_completions(texts, refs, formula=formula, executor=executor)
        ]
        groups: dict[tuple, list[float]] = defaultdict(list)
        for r, s in zip(rows, scores, strict=True):
            groups[(r["step"], r["group"])].append(s)
        widths = [max(g) - min(g) for g in groups.values()]
        for span in spans:
            steps = {
                step for (step, _), w in zip(groups, widths, strict=True) if w > 0 and w >= span
            }
            table.append(
                {
                    "formula": formula,
                    "min_group_span": span,
                    "steps_with_signal": len(steps),
                    "steps": len({step for step, _ in groups}),
                    "mean_span": round(sum(widths) / len(widths), 4),
                    "mean_reward": round(sum(scores) / len(scores), 4),
                }
            )
    trained = {r["tier"] for r in rows}
    manifest = args.rollouts.parent / "manifest.json"  # a finished run's own count, to agree with
    own = json.loads(manifest.read_text()) if manifest.is_file() else None
    record = {
        "run": {
            "formula": own["hyperparameters"]["reward_formula"],
            "min_group_span": own["hyperparameters"]["min_group_span"],
            "signal_steps": own["summary"]["signal_steps"],
        }
        if own
        else None,
        "rollouts": args.label or str(args.rollouts),
        "n_rollouts": len(rows),
        "tiers_seen": sorted(trained),
        "table": table,
    }
    out = Path(args.json)
    out.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))
    recorded(out)


if __name__ == "__main__":
    main()
