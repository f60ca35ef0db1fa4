"""The ladder's planning (jacrl.ladder.plan): a condition's scale factors, the eval settings as a
row keeps them, a training seed in the key, the planned-key warning, the notebook's hash, the
formats of a plan, the SFT iterations per task and a cell's JSON round trip. (A cell's key over
every knob: test_cell_keys.py; the ladder run itself: test_ladder.py.)"""

from __future__ import annotations

import dataclasses
import json

import pytest

from jacrl.config import SFTConfig
from jacrl.ladder.plan import (
    Cell,
    _scaled,
    eval_settings,
    key_of,
    make_cell,
    notebook_hash,
    plan,
    rung_sft_iters,
)
from jacrl.ladder.settings import LadderConfig
from jacrl.ladder.taskset import cell_tasks


def _cfg(data_dir, **kw) -> LadderConfig:
    return LadderConfig(
        **{"data_dir": data_dir, "rungs": ("1",), "sft_iters": 4, "grpo_iters": 4, **kw}
    )


def _cell(cfg, *a, **kw):
    return make_cell(cfg, *a, env={}, log=lambda _: None, **kw)


def test_a_scaled_int_knob_is_rounded_and_at_least_one_a_float_keeps_six_digits():
    cfg = SFTConfig(iters=10, learning_rate=1e-6)
    assert _scaled(cfg, {"iters": 0.33}).iters == 3  # 3.3 rounded, an int
    assert type(_scaled(cfg, {"iters": 0.33}).iters) is int
    assert _scaled(cfg, {"iters": 0.01}).iters == 1  # never 0 iterations
    assert _scaled(cfg, {"learning_rate": 10}).learning_rate == 1e-05  # not 1.0000000000000002e-05


def test_eval_settings_are_what_a_row_reads_back():
    """A row keeps them as JSON: the settings equal what reads back (tuples are lists)."""
    ev = eval_settings(LadderConfig())
    assert isinstance(ev["k"], list)
    assert ev == json.loads(json.dumps(ev))


def test_a_training_seed_other_than_the_ladders_is_in_the_key(data_dir):
    cfg = _cfg(data_dir)
    seeded = _cell(cfg, "1", condition="sft", train_seed=cfg.seed + 7)
    plain = _cell(cfg, "1", condition="sft")
    assert seeded.key_parts["train_seed"] == cfg.seed + 7
    assert f"-s{cfg.seed + 7}-" in seeded.key and "train_seed" not in plain.key_parts
    assert seeded.name.endswith(f"/s{cfg.seed + 7}")


def test_the_planned_key_warning_only_when_the_keys_differ(data_dir):
    cfg = _cfg(data_dir)
    said: list[str] = []
    key = make_cell(cfg, "1", condition="sft", env={}, log=said.append).key
    make_cell(cfg, "1", condition="sft", cell_key=key, env={}, log=said.append)
    assert said == []  # no key planned, or the planned one: nothing to say
    old = make_cell(cfg, "1", condition="sft", cell_key="r1-old", env={}, log=said.append)
    assert old.key == "r1-old" and len(said) == 1 and f"computed {key}" in said[0]


def _notebook(tmp_path, name, cells):
    path = tmp_path / name
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4}))
    return path


def test_the_notebook_hash_is_its_code_whatever_the_source_spelling(tmp_path):
    """nbformat allows a cell's source as a list of lines or one string: the same code hashes
    the same; markdown and outputs do not count; other code hashes differently."""
    code = {"cell_type": "code", "source": ["x = 1\n", "print(x)"], "outputs": []}
    as_list = _notebook(tmp_path, "a.ipynb", [code])
    as_text = _notebook(
        tmp_path,
        "b.ipynb",
        [
            {"cell_type": "markdown", "source": "# words"},
            {**code, "source": "x = 1\nprint(x)", "outputs": [{"text": "1"}]},
        ],
    )
    other = _notebook(tmp_path, "c.ipynb", [{**code, "source": "x = 2\nprint(x)"}])
    assert notebook_hash(as_list) == notebook_hash(as_text)
    assert notebook_hash(other) != notebook_hash(as_list)
    assert notebook_hash(tmp_path / "none.ipynb") == "missing"


def test_a_plan_has_a_cell_per_format(data_dir):
    cells = plan(_cfg(data_dir, conditions=("sft",), formats=("hole", "conversion")))
    assert [c.format for c in cells] == ["hole", "conversion"]
    assert all(c.paired for c in cells)


def test_sft_iterations_per_task_multiply_the_rungs_tasks(data_dir):
    cfg = _cfg(data_dir, rungs=("3",), sft_iters=1000, sft_iters_per_task=2)
    n = len(cell_tasks("3", data_dir)["train"])
    assert n == 3 and rung_sft_iters(cfg, "3") == 2 * n
    assert rung_sft_iters(dataclasses.replace(cfg, sft_iters=5), "3") == 5  # capped


def test_a_cell_reads_back_from_its_json(data_dir):
    """What the ladder hands notebook 30: the same cell, key and name, nothing logged."""
    cfg = _cfg(data_dir, rungs=("3",), n=3, k=(1, 2), sets={"sft": {"learning_rate": 2e-4}})
    cell = _cell(cfg, "3", condition="sft", format="conversion", train_seed=5)
    said: list[str] = []
    back = Cell.from_json(cell.to_json(), env={}, log=said.append)
    assert said == []
    assert (back.key, back.name, back.rung, back.train_seed) == (cell.key, cell.name, "3", 5)
    assert (back.format, back.paired, back.cfg.n) == ("conversion", True, 3)
    assert back.stages["sft"].learning_rate == 2e-4 and back.cfg == cell.cfg


def test_grpo_prompts_pick_from_the_train_pool_and_are_in_the_key(data_dir):
    """grpo_prompts: rung = the rung's own tasks (no key part: earlier keys hold); pool = every
    train-pool task; beyond = the pool outside the rung; N = the pool's first N. Never a holdout
    or valid task; a choice that picks other tasks is another key; a cell with no GRPO stage
    ignores it."""
    from jacrl.ladder.taskset import grpo_tasks
    from jacrl.tasks import splits
    from jacrl.tasks.record import meta

    def ids(ts):
        return [meta(t)["id"] for t in ts]

    pool = ids(splits.load_split("trainpool", data_dir))
    held = set(ids(splits.load_split("holdout", data_dir) + splits.load_split("valid", data_dir)))
    assert ids(grpo_tasks("rung", "3", data_dir)) == pool[:3]
    assert ids(grpo_tasks("pool", "3", data_dir)) == pool
    assert ids(grpo_tasks("beyond", "3", data_dir)) == pool[3:]
    assert ids(grpo_tasks("5", "1", data_dir)) == pool[:5]
    assert not held & set(ids(grpo_tasks("pool", "3", data_dir)))
    keys = {
        p: _cell(_cfg(data_dir, grpo_prompts=p), "3", condition="sft_grpo").key_parts
        for p in ("rung", "pool", "beyond")
    }
    assert "grpo_prompts" not in keys["rung"]
    assert keys["pool"]["grpo_prompts"] == "pool"
    assert len({key_of(k) for k in keys.values()}) == 3
    sft = [_cell(_cfg(data_dir, grpo_prompts=p), "3", condition="sft").key for p in keys]
    assert len(set(sft)) == 1  # no GRPO stage: the choice is not its input


@pytest.mark.parametrize(
    ("prompts", "rung", "says"),
    [
        ("beyond", "all", "the rung is the whole pool"),
        ("some", "1", "expected rung, pool, beyond or a number"),
        ("0", "1", "expected rung, pool, beyond or a number"),
        ("100000", "1", "the train pool has"),
    ],
)
def test_a_grpo_prompt_choice_that_picks_nothing_is_a_one_line_error(data_dir, prompts, rung, says):
    from jacrl.ladder.taskset import grpo_tasks

    with pytest.raises(ValueError, match=says) as e:
        grpo_tasks(prompts, rung, data_dir)
    assert "\n" not in str(e.value)
