"""`check_model`: will this model get through hours of training and evaluation? Checked from its
tokenizer and config.json alone (no weights are loaded), before any work.

One task's prompt is rendered by the three paths that use it: evaluation (`jacrl.prompts.
prompt_ids`, what `jacrl.generate` decodes from), SFT (mlx-lm's `ChatDataset` on
`jacrl.tasks.record.gold_records`, prompt masked) and GRPO (mlx-lm-lora's `GRPODataset` on the
records `jacrl.train.grpo` builds), and they must agree token for token. Then, over the task set
(the project's hole-fill and conversion tasks unless given):

| check | error when |
|---|---|
| architecture | mlx-lm has no model class for config.json's model_type, or no *.safetensors |
| chat template | the tokenizer has none |
| system role | the template rejects a system message or drops its text |
| same prompt | SFT's or GRPO's prompt tokens differ from evaluation's |
| end tokens | none is set, or an assistant turn is not closed by one (generation would not stop) |
| prompt length | a prompt or a gold example exceeds a stage's limit on it (it would be cut) |
| token budget | the longest gold answer exceeds the eval max_tokens or a stage's sampling budget |
| thinking | (warnings only) a thinking template, and what mlx-lm passes as `enable_thinking` |

The stages' limits checked are every stage's that the stage table names (each
`jacrl.stages.Stage`'s `limits`), each reported as its `--set` knob (grpo.max_seq_length). Prompt
+ eval budget beyond the model's max_position_embeddings is a warning.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from jacrl.config import EvalConfig
from jacrl.models.registry import display_path, load_tokenizer, resolve
from jacrl.prompts import SYSTEM_PROMPT, chat_messages, prompt_ids
from jacrl.stages import LIMIT_KINDS, STAGES
from jacrl.tasks.record import meta, prompt_answer, read_tasks

LEVELS = ("ok", "warn", "error")


@dataclasses.dataclass(frozen=True)
class Finding:
    check: str
    level: str  # ok | warn | error
    text: str


@dataclasses.dataclass
class ModelCheck:
    """What `check_model` found; `errors` are what would fail (or silently break) a run."""

    model: str
    path: Path
    summary: list[str]
    findings: list[Finding]
    prompt_text: str  # the one task's prompt as every stage renders it

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.level == "warn"]

    def report(self) -> str:
        width = max(len(f.check) for f in self.findings)
        return "\n".join(
            self.summary + [f"{f.level:<5}  {f.check:<{width}}  {f.text}" for f in self.findings]
        )


def default_tasks() -> tuple[list[dict], str]:
    """The project's hole-fill tasks and, when built, its conversion tasks (longer prompts)."""
    from jacrl.project import project

    proj = project()
    tasks = read_tasks(proj.tasks)
    what = f"{len(tasks)} hole-fill"
    conv = proj.data / "conversion.jsonl"
    if conv.is_file():
        more = [{**t, "format": "conversion"} for t in read_tasks(conv)]  # named in findings
        tasks += more
        what += f" + {len(more)} conversion"
    return tasks, f"{what} tasks ({display_path(proj.data)})"


def _token_names(tok, ids) -> str:
    return ", ".join(f"{tok.convert_ids_to_tokens(int(i))} ({i})" for i in sorted(ids))


def _first_diff(a: Sequence[int], b: Sequence[int]) -> int:
    return next(
        (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


class _Checker:
    """The checks, each appending findings; state shared through attributes."""

    def __init__(self, tok, config: dict, path: Path, limits: dict, ev: EvalConfig):
        self.tok, self.config, self.path = tok, config, path
        self.limits, self.ev = limits, ev  # {"stage.field": (kind, tokens)} of every stage
        self.findings: list[Finding] = []

    def add(self, check: str, level: str, text: str) -> None:
        self.findings.append(Finding(check, level, text))

    def architecture(self) -> None:
        try:
            from mlx_lm.utils import _get_classes

            _get_classes(self.config)
            mt = f"model_type {self.config.get('model_type')!r} is supported by mlx-lm"
        except (ImportError, AttributeError):  # mlx-lm moved its helper: the load will tell
            mt = f"model_type {self.config.get('model_type')!r} (mlx-lm's support not checked)"
        except (KeyError, ValueError) as e:
            self.add("architecture", "error", f"mlx-lm cannot build this model: {e}")
            return
        if not any(self.path.glob("*.safetensors")):
            self.add(
                "architecture",
                "error",
                f"no *.safetensors weights in {display_path(self.path)}: mlx_lm.load would fail",
            )
            return
        self.add("architecture", "ok", mt)

    def template(self, prompt: str) -> bool:
        """Chat template present and the system role kept; False stops the other checks."""
        tok = self.tok
        if not tok.has_chat_template:
            self.add(
                "chat template",
                "error",
                "the tokenizer has no chat template: every stage renders [system, user] with it",
            )
            return False
        self.add("chat template", "ok", "present")
        try:
            text = tok.apply_chat_template(
                chat_messages(prompt), add_generation_prompt=True, tokenize=False
            )
        except Exception as e:  # noqa: BLE001 - jinja's raise_exception and template errors
            msg = " ".join(str(e).split())
            self.add(
                "system role",
                "error",
                f"the chat template fails on [system, user]: {msg} "
                "(every stage sends the system prompt)",
            )
            return False
        if SYSTEM_PROMPT not in text:
            self.add(
                "system role",
                "error",
                "the chat template drops the system message: the "
                "system prompt every stage sends would never reach the model",
            )
            return False
        self.add("system role", "ok", "supported: the system prompt is in the rendered prompt")
        return True

    def same_prompt(self, task: dict) -> tuple[list[int], list[int], int] | None:
        """Eval's prompt ids vs SFT's (masked prefix) and GRPO's; (eval ids, SFT tokens, SFT
        offset) when they agree."""
        from mlx_lm.tuner.datasets import ChatDataset
        from mlx_lm_lora.trainer.datasets import GRPODataset

        from jacrl.tasks.record import gold_records

        tok, tid = self.tok, meta(task)["id"]
        ids = prompt_ids(tok, task["prompt"])
        full, offset = ChatDataset(gold_records([task]), tok, mask_prompt=True).process(
            gold_records([task])[0]
        )
        full = list(full)
        # the records train.grpo builds: the task as the model sees it, plus the system prompt
        grpo_ids = list(GRPODataset([{**prompt_answer(task), "system": SYSTEM_PROMPT}], tok)[0][0])
        bad = []
        if full[:offset] != ids:
            bad.append(
                f"SFT's masked prompt differs from eval's at token "
                f"{_first_diff(full[:offset], ids)} ({offset} vs {len(ids)} tokens)"
            )
        elif full[: len(ids)] != ids:
            bad.append("SFT's example does not start with eval's prompt")
        if grpo_ids != ids:
            bad.append(
                f"GRPO's prompt differs from eval's at token {_first_diff(grpo_ids, ids)} "
                f"({len(grpo_ids)} vs {len(ids)} tokens)"
            )
        if bad:
            self.add(
                "same prompt",
                "error",
                f"task {tid}: " + "; ".join(bad) + ": the model "
                "would be trained on one prompt and evaluated on another",
            )
            return None
        self.add(
            "same prompt",
            "ok",
            f"task {tid}: eval, SFT and GRPO render the same {len(ids)} prompt tokens",
        )
        return ids, full, offset

    def end_tokens(self, task: dict, full: list[int], offset: int) -> int | None:
        """The end tokens, and where the SFT example's assistant turn is closed by one: the
        answer's length in tokens, closing token included (None on an error)."""
        tok = self.tok
        eos = set(tok.eos_token_ids or ())
        if not eos:
            self.add(
                "end tokens",
                "error",
                "no end token (config.json eos_token_id, tokenizer "
                "eos_token): generation would never stop before max_tokens",
            )
            return None
        target = full[offset:]
        close = next((i for i, t in enumerate(target) if t in eos), None)
        if close is None:
            answer = gold_answer(task)
            text = tok.apply_chat_template(chat_messages(task["prompt"], answer), tokenize=False)
            tail = text[text.rfind(answer) + len(answer) :] if answer in text else ""
            first = tok.encode(tail, add_special_tokens=False)[:1] if tail.strip() else []
            what = f"with {_token_names(tok, first)}" if first else "with nothing"
            self.add(
                "end tokens",
                "error",
                f"the chat template closes an assistant turn {what}, "
                f"not an end token ({_token_names(tok, eos)}): SFT would never teach the "
                "model to stop and generation would run to max_tokens (add the token to "
                "config.json's eos_token_id)",
            )
            return None
        several = f"{len(eos)} end tokens: " if len(eos) > 1 else "end token "
        self.add(
            "end tokens",
            "ok",
            f"{several}{_token_names(tok, eos)}; an assistant turn is "
            f"closed by {_token_names(tok, [target[close]])}",
        )
        return close + 1

    def lengths(self, tasks: Sequence[dict]) -> None:
        """Longest prompt and gold example over the task set vs the stages' limits, and the
        longest gold answer vs the token budgets."""
        from mlx_lm.tuner.datasets import ChatDataset

        from jacrl.tasks.record import gold_records

        tok, eos = self.tok, set(self.tok.eos_token_ids or ())
        recs = gold_records(tasks)
        ds = ChatDataset(recs, tok, mask_prompt=True)
        prompt_n, full_n, answer_n = [], [], []
        for t, r in zip(tasks, recs, strict=True):
            full, offset = ds.process(r)
            target = list(full[offset:])
            close = next((i + 1 for i, x in enumerate(target) if x in eos), len(target))
            name = meta(t)["id"] + (f" {t['format']}" if t.get("format") else "")
            prompt_n.append((offset, name))
            full_n.append((len(full), name))
            answer_n.append((close, name))
        (p, pid), (f, fid), (a, aid) = max(prompt_n), max(full_n), max(answer_n)
        of = {k: {n: v for n, (kind, v) in self.limits.items() if kind == k} for k in LIMIT_KINDS}
        errs = [
            f"the longest {what} ({name}) has {n} tokens > {_listed(over)} ({why}; raise "
            f"{' and '.join(over)})"
            for what, n, name, kind, why in (
                ("prompt", p, pid, "prompt", "refused after loading"),
                ("gold example", f, fid, "example", "its end would be cut off"),
            )
            if (over := {k: v for k, v in of[kind].items() if n > v})
        ]
        if errs:
            self.add("prompt length", "error", "; ".join(errs))
        else:
            self.add(
                "prompt length",
                "ok",
                f"longest prompt {p} tokens ({pid}) <= {_listed(of['prompt'])}; longest gold "
                f"example {f} ({fid}) <= {_listed(of['example'])}",
            )
        positions, m = self.config.get("max_position_embeddings"), self.ev.max_tokens
        if positions and p + m > positions:
            self.add(
                "positions",
                "warn",
                f"longest prompt {p} + max_tokens {m} > "
                f"max_position_embeddings {positions}: generation runs past the positions "
                "the model was trained on",
            )
        elif positions:
            self.add(
                "positions",
                "ok",
                f"longest prompt {p} + max_tokens {m} <= max_position_embeddings {positions}",
            )
        budgets = {"eval.max_tokens": self.ev.max_tokens, **of["answer"]}
        short = {n: b for n, b in budgets.items() if a > b}
        if short:
            self.add(
                "token budget",
                "error",
                f"the longest gold answer ({aid}) takes {a} tokens "
                f"(end token included) > {_listed(short)}: a correct answer would be cut off",
            )
        else:
            self.add(
                "token budget",
                "ok",
                f"longest gold answer {a} tokens ({aid}, end token included) fits "
                f"{_listed(budgets)} ({min(budgets.values()) - a} to spare)",
            )

    def thinking(self, prompt: str, ids: list[int], full: list[int], offset: int) -> None:
        """What mlx-lm passes as enable_thinking (its wrapper sets it from the vocabulary's think
        tokens) and whether the template reacts."""
        tok = self.tok
        msgs = chat_messages(prompt)
        off = list(
            tok.apply_chat_template(
                msgs, add_generation_prompt=True, return_dict=False, enable_thinking=False
            )
        )
        on = list(
            tok.apply_chat_template(
                msgs, add_generation_prompt=True, return_dict=False, enable_thinking=True
            )
        )
        switch = off != on
        if not tok.has_thinking:
            self.add(
                "thinking",
                "ok",
                "no think tokens in the vocabulary: mlx-lm passes "
                "enable_thinking=False"
                + ("; the template honours it" if switch else " (the template has no switch)"),
            )
            return
        marks = f"{tok.think_start} ... {tok.think_end}"
        if not switch:
            self.add(
                "thinking",
                "warn",
                f"the vocabulary has {marks} and the template has no "
                "enable_thinking switch: the model may think before it answers, inside the "
                f"{self.ev.max_tokens}-token budget",
            )
            return
        opens = tok.decode(full[offset : offset + 8])
        self.add(
            "thinking",
            "warn",
            f"thinking template: mlx-lm passes enable_thinking=True to "
            f"every stage (the vocabulary has {marks}), so the prompt ends open and a model "
            f"may spend its {self.ev.max_tokens}-token budget thinking; SFT targets start "
            f"{opens!r}; enable_thinking=False would append "
            f"{tok.decode(off[_first_diff(off, ids) :])!r} to the prompt",
        )


def _listed(limits: dict[str, int]) -> str:
    """'grpo.max_seq_length 1280, dpo.max_seq_length 2048'."""
    return ", ".join(f"{name} {v}" for name, v in limits.items())


def gold_answer(task: dict) -> str:
    """The assistant turn SFT trains on for a task (the fenced gold body)."""
    from jacrl.tasks.record import fenced, gold_body

    return fenced(gold_body(task))


def check_model(
    model: str | os.PathLike,
    tasks: Sequence[dict] | None = None,
    *,
    task_id: str | None = None,
    configs: Mapping[str, object] | None = None,
    ev: EvalConfig | None = None,
    tasks_label: str = "",
) -> ModelCheck:
    """Check a registry name or model dir (see the module docstring) against the task set
    (default: `default_tasks()`), rendering task `task_id` (default: the first) by every stage,
    and against the limits of every stage's config in `configs` ({stage: config}; a stage not
    there: its defaults). A name that does not resolve, or a tokenizer that does not load,
    raises ModelError."""
    path = resolve(model)
    configs, ev = configs or {}, ev or EvalConfig()
    limits = {
        name: value
        for s in STAGES.values()
        for name, value in s.limit_values(configs.get(s.name) or s.config()).items()
    }
    if tasks is None:
        tasks, tasks_label = default_tasks()
    tasks = list(tasks)
    if not tasks:
        raise ValueError("no tasks to check the model against")
    one = tasks[0]
    if task_id is not None:
        found = [t for t in tasks if meta(t)["id"] == task_id]
        if not found:
            raise ValueError(f"no task {task_id!r} in the task set")
        one = found[0]
    tok = load_tokenizer(path)  # a config.json that is not JSON: its one line here
    config = json.loads((path / "config.json").read_text())
    c = _Checker(tok, config, path, limits, ev)
    summary = [
        f"model {model} ({display_path(path)}): {config.get('model_type')}, vocabulary "
        f"{len(tok)}; tokenizer and config.json only, no weights loaded",
        f"tasks: {tasks_label or f'{len(tasks)} given'}; rendered: {meta(one)['id']}",
    ]
    c.architecture()
    text = ""
    if c.template(one["prompt"]):
        text = tok.apply_chat_template(
            chat_messages(one["prompt"]), add_generation_prompt=True, tokenize=False
        )
        same = c.same_prompt(one)
        if same is not None:
            ids, full, offset = same
            c.end_tokens(one, full, offset)
            c.lengths(tasks)
            c.thinking(one["prompt"], ids, full, offset)
    return ModelCheck(str(model), path, summary, c.findings, text)
