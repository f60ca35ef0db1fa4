"""Validate drivers into task records: drivers -> data/tasks.jsonl + data/templates/<id>.jac
(the record itself, and reading it, is `jacrl.tasks.record`).

A driver enters the set only if it runs twice (under two different string-hash seeds) with identical
non-empty stdout and exit 0; its gold body, fenced, scores 1.0 through extraction + splice + run;
the whole driver echoed back as an answer scores 1.0; and an empty body does not pass (the hole
matters). Each failure is one line `drivers/x.jac:LINE: reason`. By default any failure means
nothing is written; `keep_going` writes the drivers that passed (still all at once) and reports the
rest. Building a whole folder (policy, sidecars, the atomic write) is `jacrl.tasks.build`.
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from pathlib import Path

from jacrl.executor import Executor, Verdict
from jacrl.ruler.drivers import Driver, DriverError, parse_driver
from jacrl.ruler.extract import splice
from jacrl.ruler.reward import score_completions
from jacrl.tasks.record import fenced

TIMEOUT = 20  # seconds; the earlier harness's task timeout: the cap, and `--fixed-timeout`'s value
TIMEOUT_STEPS = (0.5, 1.0, 5.0, TIMEOUT)  # a task's time-out: the first step >= 3x its gold's CPU
TIMEOUT_FACTOR = 3


def task_timeout(gold_cpu_seconds: float) -> float:
    """A task's time-out from its gold program's CPU time (the larger of the two build runs): the
    first of TIMEOUT_STEPS that is at least TIMEOUT_FACTOR x that. The executor's time-out is CPU
    time of the job's whole process tree, enforced to the clock tick (a wall-clock backstop 1 s
    later), which a busy machine stretches little: every gold here uses 0.03-0.08 s on an Intel
    host and 0.09-0.12 s on an AMD EPYC one (0.12 s with both cores spinning; one crossed 0.125 s
    in a loaded suite), far from the 0.167 s boundary, so a rebuild stays byte-identical on either
    and every task gets 0.5 s, 4x or more its gold's CPU time: a correct answer is not cut off,
    and a looping rollout holds a job slot 0.5 s instead of 20."""
    need = TIMEOUT_FACTOR * gold_cpu_seconds
    return next((t for t in TIMEOUT_STEPS if t >= need), TIMEOUT_STEPS[-1])


PROMPT_SENTENCE = (
    "Complete the Jac file below: replace the `# TODO` line with the correct Jac "
    "code for that unit. Return only the replacement code, in a ```jac code block."
)


def prompt_text(driver: Driver) -> str:
    """The task prompt, byte for byte as the earlier harness wrote it: the instruction, a blank
    line, the sentence, a blank line, then the prompt view in a ```jac fence (the view keeps the
    file's trailing newline, so an empty line precedes the closing fence)."""
    return f"{driver.instruction}\n\n{PROMPT_SENTENCE}\n\n```jac\n{driver.prompt_view}\n```"


def answer_json(
    driver: Driver,
    expected_output: str,
    timeout: float = TIMEOUT,
    baseline_output: str | None = None,
) -> str:
    """The record's `answer`: the earlier harness's keys first (id, source, expected_output,
    timeout), then ours. The template and gold body travel inside it, so the reward needs no file
    lookups. baseline_output: the template's stdout with an empty body (what does not depend on the
    hole; the default reward pays only for the rest)."""
    return json.dumps(
        {
            "id": driver.id,
            "source": driver.source,
            "expected_output": expected_output,
            "timeout": timeout,
            "family": driver.family,
            "unit": driver.unit.to_json(),
            "template": driver.template,
            "gold": driver.gold,
            "baseline_output": baseline_output,
        }
    )


def record(driver: Driver, answer: str) -> dict:
    return {"prompt": prompt_text(driver), "answer": answer}


# stderr lines that only locate or decorate an error: frames, source excerpts, elisions
NOISE = re.compile(r"^(at |File \"|--> |\d*\s*\||\.\.\. \[|Traceback \(|help: )")
HEADLINE = re.compile(r"^(?:✖\s*)?[\w.]*(?:Error|Exception|Exit|Interrupt)\b")
# where: jaclang's `--> file.jac:L:C` / `at f() file.jac:L` (innermost first), Python's
# `File "file.jac", line L` (innermost last)
JAC_AT = re.compile(r"\.jac:(\d+)")
PY_AT = re.compile(r"\.jac\", line (\d+)")


def failure(v: Verdict) -> tuple[int | None, str]:
    """(line in the program or None, the one stderr line that names the cause) of a failed run:
    the exception line (jaclang prints it first, Python last), not a frame or source excerpt."""
    lines = [ln.strip() for ln in v.stderr.splitlines()]
    meaningful = [ln for ln in lines if ln and not NOISE.match(ln)]
    heads = [ln for ln in meaningful if HEADLINE.match(ln)]
    if heads or meaningful:
        why = re.sub(r"^✖\s*Error:\s*", "", (heads or meaningful)[-1])  # jaclang's own label
    elif v.status == "exit" and v.exit_code:
        why = f"exit code {v.exit_code}"
    else:
        why = v.status
    jac = [int(m.group(1)) for ln in lines if (m := JAC_AT.search(ln))]
    py = [int(m.group(1)) for ln in lines if (m := PY_AT.search(ln))]
    return (jac[0] if jac else py[-1] if py else None), why


FILE_LINE = re.compile(r"^(.+?):(\d+): ")


@dataclasses.dataclass
class BuildReport:
    built: list[dict]
    failures: list[str]  # one line each: path:line: reason (a corpus-wide one: folder: reason)
    seconds: float
    warnings: list[str] = dataclasses.field(default_factory=list)  # policy lines, not enforced
    written: bool = False  # whether tasks.jsonl + templates/ were (re)written

    @property
    def rejected(self) -> int:
        """How many driver files failed (a file can fail more than one check)."""
        return len({m.group(1) for ln in self.failures if (m := FILE_LINE.match(ln))})


def validate(
    drivers: list[Driver], executors: tuple[Executor, Executor], fixed_timeout: bool = False
) -> BuildReport:
    """Run every check on every driver; batched so the fork server stays busy. Each task's
    time-out comes from its gold runs' CPU times (`task_timeout`), or is TIMEOUT with
    fixed_timeout."""
    t0 = time.perf_counter()
    first, second = executors
    failures: dict[str, str] = {}
    runs1 = first.run_many([d.text for d in drivers], timeout=TIMEOUT)
    runs2 = second.run_many([d.text for d in drivers], timeout=TIMEOUT)
    ok: list[tuple[Driver, str]] = []
    slower = {
        d.id: max(a.cpu_seconds, b.cpu_seconds)
        for d, a, b in zip(drivers, runs1, runs2, strict=True)
    }
    for d, a, b in zip(drivers, runs1, runs2, strict=True):
        if not a.ran:
            line, why = failure(a)
            failures[d.id] = f"{d.path}:{line or 1}: driver does not run clean ({a.status}): {why}"
        elif not a.stdout.strip():
            failures[d.id] = f"{d.path}:1: driver prints nothing (its stdout is empty)"
        elif a.stdout != b.stdout:
            failures[d.id] = f"{d.path}:1: nondeterministic stdout (differs between two runs)"
        else:
            ok.append((d, a.stdout))
    empties = first.run_many([splice(d.template, "") for d, _ in ok], timeout=TIMEOUT)
    answers = [
        answer_json(
            d,
            out,
            TIMEOUT if fixed_timeout else task_timeout(slower[d.id]),
            baseline_output=v.stdout,
        )
        for (d, out), v in zip(ok, empties, strict=True)
    ]
    checks = [("gold body", lambda d: fenced(d.gold)), ("echoed driver", lambda d: fenced(d.text))]
    for name, make in checks:
        scored = score_completions([make(d) for d, _ in ok], answers, executor=first)
        for (d, _), s in zip(ok, scored, strict=True):
            if s.score != 1.0 and d.id not in failures:
                why = (
                    s.reason
                    if s.verdict is None
                    else "its stdout differs"
                    if s.verdict.ran
                    else failure(s.verdict)[1]
                )
                failures[d.id] = (
                    f"{d.path}:{d.hole_line}: {name} scores {s.score} ({s.tier}), not 1.0: {why}"
                )
    for (d, out), v in zip(ok, empties, strict=True):
        if v.ran and v.stdout.strip() == out.strip() and d.id not in failures:
            failures[d.id] = (
                f"{d.path}:{d.hole_line}: an empty body gives the same output: "
                "the hole does not matter"
            )
    built = [record(d, a) for (d, _), a in zip(ok, answers, strict=True) if d.id not in failures]
    return BuildReport(
        built, [failures[d.id] for d in drivers if d.id in failures], time.perf_counter() - t0
    )


def load_all(
    drivers_dir: str | Path, family_map: dict[str, str] | None = None
) -> tuple[list[Driver], list[str]]:
    """The drivers that parse, in sorted path order, and a `path:line: reason` for each that does
    not (a malformed marker, or an id already taken)."""
    drivers, failures, seen = [], [], {}
    for path in sorted(p for p in Path(drivers_dir).glob("*.jac") if p.is_file()):
        try:
            d = parse_driver(path, family_map=family_map)
        except DriverError as e:
            failures.append(str(e))
            continue
        if d.id in seen:
            failures.append(f"{path}:{d.hole_line}: duplicate id {d.id!r} (also {seen[d.id]})")
            continue
        seen[d.id] = path
        drivers.append(d)
    return drivers, failures
