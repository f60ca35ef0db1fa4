"""A forged "ran" is worth nothing: a generic forger — it knows no jacrl name; it walks the stack
for any 32-hex string, writes each to the first empty regular file descriptor >= 3 and patches
`os._exit` to exit 0 — makes a raising body "ran" on the holdout tasks, and each scores exactly
what it scores with the verdict it would have had without the forge (the reward counts what a job
printed, never its exit path)."""

from __future__ import annotations

import base64
import dataclasses
import json

from jacrl.reward import Hole, score, score_completions
from jacrl.splits import load_split

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
