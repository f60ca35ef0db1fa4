"""CPU time to extract (and splice) the worst 16 KB completions we know, here and at another
revision, side by side in one run: what tests/test_reward_never_raises.py bounds (50 ms per 16 KB).

usage: python bench/extract_worst.py [--against REV] [--reps 5] [--json PATH]

Each shape is one completion of MAX_BODY characters for the first task of data/tasks.jsonl; the
figure is the best of `reps` runs of time.process_time (least disturbed by other jobs). REV's jacrl
(default ccf6cdf, before the lexer kept a stack) runs in a child process from `git archive`;
an error (RecursionError there) is printed instead of a time. Also: difflib's body similarity
on the same bodies (the grade's superlinear part, computed only for bodies that are run).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
N = 16_384


def shapes(kind: str, name: str, driver: str, gold: str) -> dict[str, str]:
    def fill(s: str) -> str:
        return (s * (N // len(s) + 1))[:N]

    return {
        "nested f-strings": fill('f"{'),
        "nested mixed f-strings": fill("f'{f\"{"),
        "headers without body": fill("def f("),
        "the unit's header repeated": fill(f"{kind} {name}("),
        "nested units": fill(f"{{ {kind} {name}() {{ "),
        "blank lines": fill("\n"),
        "fences": fill("```\n"),
        "open brackets": fill("(["),
        "driver echoed": fill(driver + "\n"),
        "gold spaced out": fill("".join(c + " " for c in gold)),
    }


def measure(reps: int) -> dict[str, dict]:
    """{shape: {extract_ms, sim_ms} or {error}} with the jacrl on sys.path."""
    from jacrl.ruler import jacsyntax, reward
    from jacrl.ruler.extract import extract_body, splice
    from jacrl.tasks.record import read_tasks

    hole = reward.Hole.from_answer(read_tasks(ROOT / "data/tasks.jsonl")[0]["answer"])
    driver = splice(hole.template, hole.gold)
    fresh = getattr(jacsyntax.literal_spans, "cache_clear", lambda: None)  # each rep from scratch
    out = {}
    for name, text in shapes(hole.unit.kind, hole.unit.name, driver, hole.gold).items():
        best, sim = float("inf"), float("inf")
        try:
            for _ in range(reps):
                fresh()
                t = time.process_time()
                body = extract_body(text, hole.unit)
                if reward.has_code(body) and len(body) <= reward.MAX_BODY:
                    splice(hole.template, body)
                best = min(best, time.process_time() - t)
                t = time.process_time()
                reward.body_similarity(body, hole.gold)
                sim = min(sim, time.process_time() - t)
            out[name] = {"extract_ms": round(best * 1e3, 2), "sim_ms": round(sim * 1e3, 2)}
        except Exception as e:  # the old revision's RecursionError is the finding
            out[name] = {"error": type(e).__name__}
    return out


def at_revision(rev: str, reps: int) -> dict[str, dict]:
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", rev, "jacrl"], capture_output=True, check=True
        ).stdout
        with tarfile.open(fileobj=__import__("io").BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        env = dict(os.environ, PYTHONPATH=tmp)
        res = subprocess.run(
            [sys.executable, __file__, "--child", "--reps", str(reps)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        return json.loads(res.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(allow_abbrev=False)
    ap.add_argument("--against", default="ccf6cdf")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.reps)))
        return
    sys.path.insert(0, str(ROOT))
    now, then = measure(args.reps), at_revision(args.against, args.reps)
    load = os.getloadavg()[0]
    print(f"extraction CPU of 16 KB completions (best of {args.reps}), load {load:.2f}")
    print(f"{'shape':28} {args.against + ' ms':>14} {'now ms':>8} {'sim ms':>8}")
    for name, r in now.items():
        old = then[name].get("extract_ms", then[name].get("error"))
        print(f"{name:28} {old!s:>14} {r['extract_ms']:>8} {r['sim_ms']:>8}")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"load": load, "reps": args.reps, "against": {args.against: then}, "now": now},
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
