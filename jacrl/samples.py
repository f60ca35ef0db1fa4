"""An evaluation's completions, kept: one gzip-compressed JSON-lines file per result row.

`evaluate(..., samples=PATH)` writes it (`jacrl eval --log-samples`; a ladder cell passes
`cell_samples_path(...)`) and the row's `samples` field names it; `read_samples` reads it back and
`browse` renders it for `jacrl samples` (a task's gold beside what the model wrote).

Line 1 is the header:
    {"jacrl_samples": 1, "row": {tag, model, adapter, split, kind, n, temperature, seed,
     max_tokens}, "tasks": {id: {family, prompt, gold, expected_output}}}
every further line one completion:
    {"task", "sample" (0 = the greedy completion, 1..n the temperature samples in order),
     "temperature", "text" (the completion as decoded), "body" (what the reward extracted),
     "tier" (exact | runs | compiles | none | empty), "reward" (the reward formula's score),
     "exact", "ran", "truncated" (hit max_tokens), "tokens", "stdout" (the spliced program's, at
     most STDOUT_CHARS characters)}
"""

from __future__ import annotations

import difflib
import gzip
import json
import os
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from jacrl import jsonl
from jacrl.ruler.extract import dedent
from jacrl.tasks.record import meta

FORMAT = 1  # the header's `jacrl_samples`: bumped when a field changes meaning
STDOUT_CHARS = 4096  # a program's stdout kept per completion (a loop can print megabytes)
SUFFIX = ".jsonl.gz"
TIERS = ("exact", "runs", "compiles", "none", "empty")
COMPILED = TIERS[:3]  # the tiers whose body compiled
HEADER_ROW = ("tag", "model", "adapter", "split", "kind", "n", "temperature", "seed", "max_tokens")


class SamplesError(ValueError):
    """A samples file that cannot be read; the message is one line naming file (and line)."""


# -------------------------------------------------------------------------------------------
# writing
# -------------------------------------------------------------------------------------------


def _family(task: dict) -> str:
    m = meta(task)
    return m.get("family") or m["id"].split("_", 1)[0]


def task_record(task: dict) -> dict:
    """What the header keeps of one task: enough to show its gold beside its samples."""
    m = meta(task)
    return {
        "family": _family(task),
        "prompt": task.get("prompt", ""),
        "gold": dedent(m["gold"]).strip("\n"),
        "expected_output": m["expected_output"],
    }


def completion_record(task_id: str, index: int, temperature: float, sample, scored) -> dict:
    """One line: a generated `Sample` and its `Scored` grade (`jacrl.generate`, the reward)."""
    v = scored.verdict
    return {
        "task": task_id,
        "sample": index,
        "temperature": temperature,
        "text": sample.text,
        "body": scored.body,
        "tier": scored.tier,
        "reward": round(scored.score, 4),
        "exact": scored.exact,
        "ran": bool(v is not None and v.ran),
        "truncated": sample.truncated,
        "tokens": sample.tokens,
        "stdout": (v.stdout[:STDOUT_CHARS] if v is not None else ""),
    }


def records(
    tasks: Sequence[dict],
    greedy: Sequence,
    samples: Sequence[Sequence],
    g_scored: Sequence,
    s_scored: Sequence[Sequence],
    temperature: float,
) -> list[dict]:
    """Every completion of an evaluation as lines, task by task: the greedy one (sample 0), then
    the n temperature samples (1..n)."""
    out = []
    for t, g, gs, ss, scs in zip(tasks, greedy, g_scored, samples, s_scored, strict=True):
        tid = meta(t)["id"]
        out.append(completion_record(tid, 0, 0.0, g, gs))
        out += [
            completion_record(tid, j, temperature, s, sc)
            for j, (s, sc) in enumerate(zip(ss, scs, strict=True), start=1)
        ]
    return out


def header(row: dict, tasks: Sequence[dict]) -> dict:
    return {
        "jacrl_samples": FORMAT,
        "row": {f: row.get(f) for f in HEADER_ROW},
        "tasks": {meta(t)["id"]: task_record(t) for t in tasks},
    }


def write_samples(path: str | os.PathLike, head: dict, lines: Iterable[dict]) -> Path:
    """Write the file whole (a temp file renamed into place: never a half-written one)."""
    path = Path(path)
    if not path.name.endswith(".gz"):
        raise ValueError(f"{path}: a samples file is gzip-compressed JSON lines: name it *{SUFFIX}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        # no time stamp and no file name in the gzip header: the same samples, the same bytes
        with (
            open(tmp, "wb") as raw,
            gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as gz,
        ):
            for rec in (head, *lines):
                gz.write(jsonl.dumps(rec).encode())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def default_path(folder: str | os.PathLike, model: str, split: str, kind: str = "") -> Path:
    """A fresh file name under folder/samples/ for one `jacrl eval` run: model, split, kind and the
    local time (plus the process id, so two runs in one second do not collide)."""
    from jacrl.results import model_label

    stem = "-".join(p for p in (model_label(model), split, kind) if p)
    return (
        Path(folder) / "samples" / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}{SUFFIX}"
    )


def cell_samples_path(results_file: str | os.PathLike, cell_key: str, kind: str) -> Path:
    """Where a ladder cell's samples of one row kind go: beside its notebook, in
    <results folder>/cells/<cell key>/samples-<kind>.jsonl.gz."""
    return Path(results_file).parent / "cells" / cell_key / f"samples-{kind}{SUFFIX}"


# -------------------------------------------------------------------------------------------
# reading and browsing
# -------------------------------------------------------------------------------------------


def read_samples(path: str | os.PathLike) -> tuple[dict, list[dict]]:
    """(header, completion lines) of a samples file; a damaged file is a SamplesError."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such samples file")
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            lines = f.read().split("\n")
    except (OSError, EOFError) as e:  # not gzip, or cut short
        raise SamplesError(f"{path}: not a whole gzip file ({e})") from None
    out = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as e:
            raise SamplesError(f"{path}:{i + 1}: not a JSON line ({e})") from None
        out.append(rec)
    if not out or not isinstance(out[0], dict) or "jacrl_samples" not in out[0]:
        raise SamplesError(f"{path}:1: no samples header (is this a `--log-samples` file?)")
    return out[0], out[1:]


def _tiers(tiers: Iterable[str] | None) -> set[str] | None:
    if not tiers:
        return None
    got = {t.strip() for x in tiers for t in str(x).split(",") if t.strip()}
    bad = sorted(got - set(TIERS))
    if bad:
        raise ValueError(f"unknown tier {', '.join(bad)} (tiers: {', '.join(TIERS)})")
    return got


def _label(rec: dict) -> str:
    which = "greedy" if rec["sample"] == 0 else f"sample {rec['sample']} (T={rec['temperature']})"
    flags = ", truncated" if rec.get("truncated") else ""
    return f"{which}: {rec['tier']}, reward {rec['reward']:.3f}, {rec['tokens']} tokens{flags}"


def _block(title: str, text: str) -> list[str]:
    body = text.rstrip("\n")
    return [f"  {title}:"] + [f"    | {ln}" for ln in (body.split("\n") if body else ["(empty)"])]


def _diff(gold: str, body: str) -> list[str]:
    d = list(
        difflib.unified_diff(
            gold.split("\n"),
            dedent(body).strip("\n").split("\n"),
            "gold",
            "sample",
            lineterm="",
            n=1,
        )
    )
    return [f"    {ln}" for ln in d[2:]] or ["    (same as the gold)"]


def _summary(head: dict, recs: list[dict]) -> list[str]:
    """One line per task: its greedy tier and the tiers of its samples."""
    by_task: dict[str, list[dict]] = {}
    for r in recs:
        by_task.setdefault(r["task"], []).append(r)
    width = max((len(t) for t in by_task), default=4)
    out = [f"{'task':<{width}}  {'family':<10} greedy    samples (by tier)"]
    for tid, rs in by_task.items():
        fam = head["tasks"].get(tid, {}).get("family", "")
        greedy = next((r["tier"] for r in rs if r["sample"] == 0), "-")
        counts: dict[str, int] = {}
        for r in rs:
            if r["sample"]:
                counts[r["tier"]] = counts.get(r["tier"], 0) + 1
        tiers = " ".join(f"{t} {counts[t]}" for t in TIERS if t in counts) or "-"
        out.append(f"{tid:<{width}}  {fam:<10} {greedy:<9} {tiers}")
    return out


def browse(
    head: dict,
    recs: Sequence[dict],
    task: str | None = None,
    tiers: Iterable[str] | None = None,
    *,
    show: str = "body",
    prompt: bool = False,
) -> str:
    """What `jacrl samples` prints. No task and no tiers: one summary line per task. Otherwise
    every task (or only `task`) with its gold and expected output, then its completions of the
    given tiers (all when none), each as its extracted body, its whole `text`, or a `diff`
    against the gold (show = body | text | diff); prompt=True shows the task's prompt too."""
    if show not in ("body", "text", "diff"):
        raise ValueError(f"show must be body, text or diff, not {show!r}")
    want = _tiers(tiers)
    if task is not None and task not in head["tasks"]:
        known = ", ".join(list(head["tasks"])[:8])
        raise ValueError(
            f"no task {task!r} in these samples (tasks: {known}"
            f"{', ...' if len(head['tasks']) > 8 else ''})"
        )
    row = head["row"]
    title = (
        f"{row.get('model')}{' + ' + row['adapter'] if row.get('adapter') else ' (base)'}"
        f"  split {row.get('split') or '-'}  n={row.get('n')} T={row.get('temperature')} "
        f"seed={row.get('seed')} max_tokens={row.get('max_tokens')}"
        + (f"  tag={row['tag']}" if row.get("tag") else "")
    )
    recs = [
        r
        for r in recs
        if (task is None or r["task"] == task) and (want is None or r["tier"] in want)
    ]
    if task is None and want is None:
        return "\n".join([title, *_summary(head, recs)])
    out = [title]
    shown: dict[str, list[dict]] = {}
    for r in recs:
        shown.setdefault(r["task"], []).append(r)
    if not shown:
        return "\n".join(out + ["no completions match"])
    for tid, rs in shown.items():
        t = head["tasks"].get(tid, {})
        out += ["", f"== {tid} ({t.get('family', '')})"]
        if prompt:
            out += _block("prompt", t.get("prompt", ""))
        out += _block("gold", t.get("gold", "")) + _block(
            "expected output", t.get("expected_output", "")
        )
        for r in rs:
            out.append(f"  -- {_label(r)}")
            if show == "diff":
                out += _diff(t.get("gold", ""), r["body"])
            else:
                out += _block(
                    "completion" if show == "text" else "body",
                    r["text"] if show == "text" else r["body"],
                )
            if r["ran"] and not r["exact"]:
                out += _block("its output", r["stdout"])
    return "\n".join(out)


# -------------------------------------------------------------------------------------------
# DPO's preference pairs (a dpo artifact's pairs.jsonl, `jacrl.train.dpo`)
# -------------------------------------------------------------------------------------------

PAIR_FIELDS = ("task", "chosen", "rejected", "chosen_reward", "rejected_reward", "reason")


def read_pairs(path: str | os.PathLike) -> list[dict]:
    """The rows of a DPO artifact's pairs.jsonl (or of the artifact directory); a row lacking a
    pair's fields is a SamplesError naming the line."""
    path = Path(path)
    path = path / "pairs.jsonl" if path.is_dir() else path
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such pairs file")
    rows = jsonl.read(path)
    for i, r in enumerate(rows):
        missing = [f for f in PAIR_FIELDS if f not in r]
        if missing:
            raise SamplesError(f"{path}:{i + 1}: not a DPO pair (no {', '.join(missing)})")
    return rows


def browse_pairs(rows: Sequence[dict], task: str | None = None, *, show: str = "body") -> str:
    """What `jacrl samples pairs.jsonl` prints: without `task` one line per pair; with it, that
    task's pairs, chosen above rejected (show = body: the fenced code only; text: as written)."""
    if task is not None:
        rows = [r for r in rows if r["task"] == task]
        if not rows:
            raise ValueError(f"no pair of task {task!r} in these pairs")
    if task is None:
        width = max((len(r["task"]) for r in rows), default=4)
        return "\n".join(
            [f"{'task':<{width}}  split  chosen -> rejected (rewards)  reason"]
            + [
                f"{r['task']:<{width}}  {r.get('split', '-'):<5}  {r['chosen_reward']:.3f} -> "
                f"{r['rejected_reward']:.3f}  {r['reason']}"
                for r in rows
            ]
        )
    out = []
    for r in rows:
        out += ["", f"== {r['task']} ({r.get('split', '-')}): {r['reason']}"]
        for side in ("chosen", "rejected"):
            text = r[side] if show == "text" else _code(r[side])
            out += _block(
                f"{side} ({r.get(side + '_tier', '-')}, reward {r[side + '_reward']:.3f})", text
            )
    return "\n".join(out)


def _code(text: str) -> str:
    """The fenced code of a completion (all of it when it has no fence)."""
    parts = text.split("```")
    return parts[1].split("\n", 1)[1] if len(parts) >= 3 and "\n" in parts[1] else text
