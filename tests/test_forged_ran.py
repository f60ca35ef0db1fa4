"""A forged "ran" is worth nothing: a generic forger — it knows no jacrl name; it walks the stack
for any 32-hex string, writes each to the first empty regular file descriptor >= 3 and patches
`os._exit` to exit 0 — makes a raising body "ran" on the holdout tasks, and each scores exactly
what it scores with the verdict it would have had without the forge (the reward counts what a job
printed, never its exit path)."""

from __future__ import annotations

import base64
import dataclasses
import json

from jacrl.config import DPOConfig
from jacrl.evaluate import grade
from jacrl.generate import best_of
from jacrl.ruler.reward import Hole, score, score_completions
from jacrl.tasks.record import fenced, gold_body
from jacrl.tasks.splits import load_split
from jacrl.train.dpo import build_pairs

FORGER = r"""
import os, re, stat, sys
found, f = set(), sys._getframe()
while f is not None:
    for v in list(f.f_locals.values()):
        if isinstance(v, str) and re.fullmatch(r"[0-9a-f]{32}", v):
            found.add(v)
    f = f.f_back
for fd in range(3, 256):
    try:
        st = os.fstat(fd)
    except OSError:
        continue
    if stat.S_ISREG(st.st_mode) and st.st_size == 0:
        for h in found:
            os.pwrite(fd, h.encode(), 0)
        break
os._exit = lambda code, _exit=os._exit: _exit(0)
"""
BODY = (
    f'exec(__import__("base64").b64decode("{base64.b64encode(FORGER.encode()).decode()}")'
    '.decode());\nraise RuntimeError("no answer");'
)


def test_a_forged_ran_scores_what_the_same_body_scores_without_it(executor):
    tasks = load_split("holdout")
    scored = score_completions(
        [f"```jac\n{BODY}\n```"] * len(tasks), [t["answer"] for t in tasks], executor=executor
    )
    forged = [s for s in scored if s.verdict is not None and s.verdict.ran]
    print(f"\nforged 'ran' on {len(forged)}/{len(tasks)} holdout tasks")
    assert len(forged) >= len(tasks) // 2, [s.verdict.status for s in scored if s.verdict][:5]
    for t, s in zip(tasks, scored, strict=True):
        if s.verdict is None or not s.verdict.ran:
            continue
        honest = dataclasses.replace(s.verdict, ran=False, status="runtime_error", exit_code=1)
        hole = Hole.from_answer(t["answer"])
        without = score(s.body, honest, hole)
        assert s.score <= without.score, (json.loads(t["answer"])["id"], s.score, without.score)


def test_tools_act_on_the_ruler_never_on_a_forged_ran(executor):
    """Best-of-k, evaluate's run rates and deploy pick, and DPO's chosen side use what the parent
    decides (the exact match, a clean exit as the server saw it), never the job's own "ran": the
    forged-ran raiser comes first in every sample list and is never chosen, counted as run or
    certified (before: best-of-k and deploy took it over the gold, the run rate counted it)."""
    tasks = load_split("holdout")[:4]
    forged, golds = f"```jac\n{BODY}\n```", [fenced(gold_body(t)) for t in tasks]
    for t, g in zip(tasks, golds, strict=True):
        r = best_of([forged, g], t)
        assert (r["accepted"], r["index"], r["check"]) == (True, 1, "exact"), r
        assert best_of([forged], t)["accepted"] is False
    m = grade(tasks, [forged] * len(tasks), [[forged, g] for g in golds], k=(2,))
    assert m["runs"] == 0 and m["run_pct"] == 0.0, m["runs"]
    assert [p["samples_ran"] for p in m["per_task"]] == [1] * len(tasks)
    assert [p["deploy"] for p in m["per_task"]] == [True] * len(tasks)  # the gold, not the forger
    assert m["sample_run_pct"] == 50.0
    cfg = DPOConfig(reward_formula="tiered")  # the formula that pays for "ran"
    rows, _ = build_pairs(tasks, [[forged, forged, g] for g in golds], cfg)
    assert rows and all(r["chosen_source"] == "sample 3" for r in rows), rows
    rows, _ = build_pairs(tasks, [[forged] for _ in tasks], cfg)
    assert rows and all(r["chosen_source"] == "gold" for r in rows), rows
