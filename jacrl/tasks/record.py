"""The task record, as everything downstream reads it: `{"prompt", "answer"}` with the answer a JSON
string holding id, source, family, expected output, time-out, unit, template and gold body
(`meta`); the projection a model and the reward see (`prompt_answer`); a tasks file read back
(`read_tasks`); and the gold answer as training and budgets use it (`gold_body`, `fenced`, the
chat example `gold_records`). Reading a task never runs code: building tasks from drivers (which
runs them) is `jacrl.tasks.validate`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from jacrl.project import path_or
from jacrl.prompts import chat_messages
from jacrl.ruler.extract import dedent


def meta(task: dict) -> dict:
    """A task's answer record (id, family, gold, expected output, template, ...)."""
    return task.get("meta") or json.loads(task["answer"])


def family_of(task: dict) -> str:
    """The task's family: its record's, else its id's prefix before the first `_`."""
    m = meta(task)
    return m.get("family") or m["id"].split("_", 1)[0]


def prompt_answer(task: dict) -> dict:
    """The task as a model and the reward see it: {prompt, answer} and nothing else."""
    return {"prompt": task["prompt"], "answer": task["answer"]}


def read_tasks(path: str | Path | None = None) -> list[dict]:
    """Task records; each gets a parsed `meta` (the answer JSON) beside the raw fields.
    Default: the project's data/tasks.jsonl."""
    path = path_or(path, "tasks")
    if not Path(path).is_file():
        raise FileNotFoundError(
            f"{path}: no such tasks file (`jacrl build-tasks` writes data/tasks.jsonl)"
        )
    rows = []
    with open(path) as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                r["meta"] = json.loads(r["answer"])
            except (ValueError, KeyError) as e:
                raise ValueError(f"{path}:{n}: bad task record: {e}") from None
            rows.append(r)
    return rows


def fenced(body: str, tag: str = "jac") -> str:
    """A body as the model writes it: in a ```jac fence."""
    return f"```{tag}\n{body}\n```"


def gold_body(task: dict) -> str:
    return dedent(meta(task)["gold"]).strip("\n")


def task_id(task: dict) -> str:
    return meta(task)["id"]


def sft_record(prompt: str, body: str) -> dict:
    """One chat example: system, user = prompt, assistant = the fenced body."""
    return {"messages": chat_messages(prompt, fenced(body))}


def gold_records(tasks: Sequence[dict]) -> list[dict]:
    """One chat example per task: user = the prompt, assistant = the fenced gold body."""
    return [sft_record(t["prompt"], gold_body(t)) for t in tasks]


CONVERSION_FILE = "conversion.jsonl"  # beside tasks.jsonl (`jacrl.tasks.conversion` builds it)


def read_conversion(data_dir: str | Path | None = None) -> list[dict]:
    """The conversion tasks of a data dir (default: the project's data/), each with its `meta`."""
    return read_tasks(path_or(data_dir, "data") / CONVERSION_FILE)
