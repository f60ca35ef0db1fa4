"""A real pretrained chat model through the harness: SmolLM2-135M-Instruct (`make real-model`,
which `make test` runs first; its import is proved in test_gguf_import.py), bounded: the model
check, a base evaluation with per-task token budgets and extraction of its real completions, SFT
(a few LoRA steps), one GRPO step and one DPO step."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from quick import QUICK

from jacrl import train as tr
from jacrl.config import DPOConfig, EvalConfig, GRPOConfig
from jacrl.evaluate import evaluate
from jacrl.ruler.extract import code_blocks
from jacrl.samples import read_samples
from jacrl.tasks.record import meta, prompt_answer
from jacrl.token_budget import MARGIN

ROOT = Path(__file__).resolve().parents[1]
SMOLLM2 = "smollm2-135m"  # as `make real-model` registers it


def test_models_check_passes_and_import_errors_are_one_line():
    def cli(*args):
        return subprocess.run(
            [sys.executable, "-m", "jacrl.cli", *args],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=300,
        )

    r = cli("models", "import", "README.md", "--name", "x")
    assert r.returncode == 2 and "README.md: not a GGUF file" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    r = cli("models", "check", SMOLLM2)
    assert r.returncode == 0, r.stderr
    assert "end token <|im_end|> (2)" in r.stdout and "system role    supported" in r.stdout


@pytest.fixture(scope="module")
def two_tasks(harness_tasks):
    by_id = {meta(t)["id"]: t for t in harness_tasks}
    return [
        prompt_answer(by_id["arch_harness_account_deposit"]),
        prompt_answer(by_id["lib_harness_clamp_partial"]),
    ]


def test_base_evaluation_with_token_budgets(smollm2, two_tasks, tmp_path):
    """A base evaluation on the real model: each task's budget comes from its gold answer, the
    row states it, and every completion is extracted the way the reward extracts it."""
    _, tok = smollm2
    cfg = EvalConfig(n=1, k=(1,), max_tokens=512, budget_factor=0.75)
    samples = tmp_path / "s.jsonl.gz"
    row = evaluate(smollm2, None, two_tasks, cfg, samples=samples)
    # counted here from the task's answer JSON, not with jacrl's helpers: the gold body
    # dedented, fenced as the SFT turn writes it, its tokens plus the one end token
    gold = [textwrap.dedent(json.loads(t["answer"])["gold"]).strip("\n") for t in two_tasks]
    turn = [len(tok.encode(f"```jac\n{g}\n```", add_special_tokens=False)) + 1 for g in gold]
    want = [min(512, math.ceil(0.75 * n) + 16) for n in turn]
    assert MARGIN == 16 and turn != [len(tok.encode(t["prompt"])) for t in two_tasks]
    assert [p["budget"] for p in row["per_task"]] == want and max(want) < 512
    assert row["budget_tokens"] == sum(want) and row["budget_factor"] == 0.75
    _, records = read_samples(samples)
    assert len(records) == 4
    ids = [meta(t)["id"] for t in two_tasks]
    for r in records:
        assert r["tokens"] <= want[ids.index(r["task"])]
        assert r["truncated"] == (r["tokens"] == want[ids.index(r["task"])])
        if r["text"].count("```") >= 2 and code_blocks(r["text"])[0].strip():
            assert r["body"].strip(), r["text"][:200]  # a closed, non-empty block is extracted


@pytest.fixture(scope="module")
def sft_art(smollm2_dir, two_tasks, tmp_path_factory):
    cfg = dataclasses.replace(QUICK, iters=2, learning_rate=1e-4)  # the quick SFT, 2 steps
    out = tmp_path_factory.mktemp("real-train")
    return tr.sft(str(smollm2_dir), two_tasks, None, cfg, out, log=lambda m: None), out


def test_sft_grpo_and_dpo_steps_on_the_real_model(smollm2_dir, two_tasks, sft_art):
    parent, out = sft_art
    assert np.isfinite(parent.manifest["summary"]["final_train_loss"])
    grpo = tr.grpo(
        str(smollm2_dir),
        two_tasks[:1],
        None,
        GRPOConfig(
            iters=1,
            learning_rate=1e-5,
            group_size=2,
            batch_size=1,
            max_completion_length=24,
            grad_checkpoint=False,
            steps_per_report=1,
        ),
        out,
        parent=parent,
        condition="sft_grpo",
        log=lambda m: None,
    )
    assert (grpo.path / "adapters.safetensors").is_file()
    assert grpo.manifest["key_parts"]["parent"] == parent.key
    dpo = tr.dpo(
        str(smollm2_dir),
        two_tasks,
        None,
        DPOConfig(
            samples=2,
            max_tokens=24,
            pairs_per_task=1,
            iters=1,
            learning_rate=1e-5,
            batch_size=1,
            steps_per_report=1,
        ),
        out,
        parent=parent,
        log=lambda m: None,
    )
    assert (dpo.path / "adapters.safetensors").is_file()
    pairs = [json.loads(x) for x in (dpo.path / "pairs.jsonl").read_text().splitlines()]
    assert pairs and all(p["chosen"] != p["rejected"] for p in pairs)
