"""GRPO rolls out on the prompt evaluation samples with: the token ids mlx-lm-lora's GRPO dataset
builds for a training record ({prompt, answer, system = SYSTEM_PROMPT}, as jacrl.train.grpo builds
it) are exactly `jacrl.prompts.prompt_ids`, for every task of the committed train pool and the
embedded tokenizer. A drift here (another template call, a second BOS, a missing assistant header)
would train the policy on prompts it is never evaluated on."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlx_lm_lora.trainer.datasets import CacheDataset, GRPODataset

from jacrl import models, prompts, splits
from jacrl.tasks import prompt_answer

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tokenizer():
    return models.load("jac-tiny")[1]


@pytest.fixture(scope="module")
def pool():
    tasks = splits.load_split("trainpool", ROOT / "data")
    assert tasks
    return tasks


def _records(tasks, **extra):
    return [{**prompt_answer(t), **extra} for t in tasks]


def test_grpo_prompt_tokens_are_evaluations(tokenizer, pool):
    ds = CacheDataset(GRPODataset(_records(pool, system=prompts.SYSTEM_PROMPT), tokenizer))
    assert len(ds) == len(pool)
    first = ds[0][0]
    assert list(first) == prompts.prompt_ids(tokenizer, pool[0]["prompt"])
    text = tokenizer.decode(first)
    assert prompts.SYSTEM_PROMPT in text and pool[0]["prompt"] in text
    differ = [
        i
        for i, t in enumerate(pool)
        if list(ds[i][0]) != prompts.prompt_ids(tokenizer, t["prompt"])
    ]
    assert differ == []


def test_the_check_sees_a_different_system_prompt(tokenizer, pool):
    """Control: without the record's `system`, mlx-lm-lora's own <think>/<answer> system prompt
    gives other ids, so the equality above is not vacuous."""
    ds = GRPODataset(_records(pool[:1]), tokenizer)
    assert list(ds[0][0]) != prompts.prompt_ids(tokenizer, pool[0]["prompt"])
