"""A cell's key sees every input of its rows, and nothing else: each field of `LadderConfig` and
of every stage config (through `sets`) is perturbed alone, a small grid is planned (no
training), and each cell's key must change if and only if that field can change one of its
rows. What a field can change is declared here from the stage table (`jacrl.stages`): a stage's
knobs reach the cells that run the stage, the cells whose stages nest its config, and the cells
whose evaluation reads it (an sft cell's mem temperature is GRPO's calibration). The same
perturbation on main 8adcf00 left the sft key unchanged for a GRPO calibration knob (the bug
this file pins down)."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from jacrl.conditions import condition_of
from jacrl.config import SFTConfig
from jacrl.ladder.plan import plan
from jacrl.ladder.settings import LadderConfig
from jacrl.models import resolve
from jacrl.stages import STAGES

GRID = ("base", "sft", "sft_grpo", "sft_rft", "star", "raw_grpo")
ALL = set(GRID)
TRAINED = ALL - {"base"}

# LadderConfig fields that are no input of any row: where things are kept, throughput, tracking,
# time-outs, which cells a run picks. data_dir and notebook are paths too: their content is an
# input (tested with a copy elsewhere, which must keep every key).
NOT_INPUTS = (
    "batch_size",
    "results_dir",
    "figures_dir",
    "artifacts_dir",
    "report_to",
    "cell_timeout",
    "recipe",
    "data_dir",
    "notebook",
)
AXES = ("rungs", "models", "conditions")  # pick cells: a cell in both grids keeps its key


def _stage_cells(stage: str) -> set[str]:
    """The grid's cells a knob of `stage` reaches through training: those running the stage or a
    stage whose config nests the stage's config (RFT's and STaR's SFT runs are the cell's SFT)."""
    cls = STAGES[stage].config
    users = {
        s
        for s, st in STAGES.items()
        if s == stage or any(f.type in (cls, cls.__name__) for f in dataclasses.fields(st.config))
    }
    return {c for c in GRID if users & set(condition_of(c).stages)}


def _reading_cells(stage: str, name: str) -> set[str]:
    """The grid's cells whose evaluation reads `stage`'s field `name` (the table's eval_reads of
    the cell's last stage)."""
    return {
        c
        for c in GRID
        if (last := condition_of(c).last) and name in STAGES[last].eval_reads.get(stage, ())
    }


def _iters_cells(knob: str) -> set[str]:
    return set().union(*(_stage_cells(s) for s, st in STAGES.items() if st.iters == knob))


def _formula_cells() -> set[str]:
    grading = set().union(*(_stage_cells(s) for s, st in STAGES.items() if st.grades))
    return grading | set().union(*(_reading_cells(s, "reward_formula") for s in STAGES))


# LadderConfig field -> (its perturbed value, the cells it can change)
LADDER_INPUTS = {
    "formats": (("hole", "conversion"), ALL),  # hole cells become paired: other task ids
    "seed": (1, ALL),  # the evaluation's sampling seed (and the training seed)
    "train_seeds": ((1,), TRAINED),
    "sft_iters": (7, _iters_cells("sft_iters")),
    "grpo_iters": (7, _iters_cells("grpo_iters")),
    "sft_iters_per_task": (1, _iters_cells("sft_iters")),  # rung 1: min(200, 1 x its tasks)
    "reward_formula": ("tiered", _formula_cells()),
    "gen_limit": (3, ALL),
    "mem_limit": (1, ALL),
    "n": (9, ALL),
    "k": ((1, 2), ALL),
    "temperature": (0.5, ALL),
    "max_tokens": (100, ALL),
    "budget_factor": (1.5, ALL),
    "sets": None,  # every stage config's field, below
}

CHOICES = {
    "advantage": "std",
    "loss_type": "bnpo",
    "lora_keys": "self_attn.v_proj",
    "reward_formula": "tiered",
}


def _other(name: str, value):
    """A valid value other than `value` for the knob `name`."""
    if name in CHOICES:
        return CHOICES[name]
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 2 if value else 0.5
    if isinstance(value, tuple):
        return value[1:]
    raise AssertionError(f"no perturbation for {name}={value!r}")


def _knobs():
    """(stage, dotted field, value) for every field of every stage config, nested configs'
    fields included."""
    for stage, st in STAGES.items():
        cfg = st.config()
        for f in dataclasses.fields(cfg):
            value = getattr(cfg, f.name)
            if dataclasses.is_dataclass(value):
                for g in dataclasses.fields(value):
                    yield stage, f"{f.name}.{g.name}", _other(g.name, getattr(value, g.name))
            else:
                yield stage, f.name, _other(f.name, value)


@pytest.fixture(scope="module")
def grid(data_dir):
    base = LadderConfig(rungs=("1",), conditions=GRID, data_dir=data_dir)

    def keys(cfg: LadderConfig, env=None) -> dict[tuple, str]:
        cells = plan(cfg) if env is None else plan_env(cfg, env)
        return {(c.rung, c.label, c.condition, c.format): c.key for c in cells}

    def plan_env(cfg, env):
        from jacrl.ladder.plan import make_cell

        return [make_cell(cfg, "1", condition=c, env=env) for c in cfg.conditions]

    return base, keys


def _changed(before: dict, after: dict) -> set[str]:
    common = before.keys() & after.keys()
    assert common, "the perturbed grid shares no cell with the default one"
    return {k[2] for k in common if before[k] != after[k]}


def test_every_ladder_field_is_declared():
    fields = {f.name for f in dataclasses.fields(LadderConfig)}
    declared = [*NOT_INPUTS, *AXES, *LADDER_INPUTS]
    assert sorted(declared) == sorted(fields), set(fields) ^ set(declared)


def test_a_ladder_field_changes_exactly_the_keys_of_the_cells_it_feeds(grid, tmp_path):
    base, keys = grid
    k0 = keys(base)
    assert len(set(k0.values())) == len(GRID)
    for name, spec in LADDER_INPUTS.items():
        if spec is None:
            continue
        value, want = spec
        assert getattr(base, name) != value, name
        got = _changed(k0, keys(dataclasses.replace(base, **{name: value})))
        assert got == want, (name, sorted(got), sorted(want))
    data = tmp_path / "data"  # the same data and notebook elsewhere: no key moves
    shutil.copytree(base.data_dir, data)
    nb = tmp_path / "30.ipynb"
    shutil.copy(plan(base)[0].cfg.notebook, nb)
    moved = {
        "batch_size": 7,
        "results_dir": str(tmp_path / "r"),
        "figures_dir": str(tmp_path),
        "artifacts_dir": str(tmp_path / "a"),
        "report_to": "wandb",
        "cell_timeout": 60,
        "recipe": "smart",
        "data_dir": str(data),
        "notebook": str(nb),
    }
    assert set(moved) == set(NOT_INPUTS)
    for name, value in moved.items():
        assert _changed(k0, keys(dataclasses.replace(base, **{name: value}))) == set(), name
    axes = {
        "rungs": ("1", "3"),
        "conditions": ("sft", "base"),
        "models": (str(resolve("jac-tiny")),),
    }  # the same model by path: label and files
    assert set(axes) == set(AXES)
    for name, value in axes.items():
        assert _changed(k0, keys(dataclasses.replace(base, **{name: value}))) == set(), name


@pytest.mark.parametrize("stage", list(STAGES))
def test_a_stage_knob_changes_exactly_the_keys_of_the_cells_that_read_it(grid, stage):
    base, keys = grid
    k0 = keys(base)
    for st, name, value in _knobs():
        if st != stage:
            continue
        top = name.partition(".")[0]
        want = _stage_cells(stage) | _reading_cells(stage, top)
        if "." in name:  # a nested config's field (RFT's SFT): only this stage's own cells
            want = {c for c in GRID if stage in condition_of(c).stages}
        got = _changed(k0, keys(dataclasses.replace(base, sets={stage: {name: value}})))
        assert got == want, (stage, name, sorted(got), sorted(want))


def test_the_sft_key_moves_with_the_grpo_calibration(grid):
    """The bug main 8adcf00 had: an sft cell's mem rows are sampled at the temperature GRPO's
    calibration picks with the GRPO settings, which its key did not hold."""
    base, keys = grid
    k0 = keys(base)
    sft = ("1", "jac-tiny", "sft", "hole")
    assert (
        keys(dataclasses.replace(base, sets={"grpo": {"temperature_grid": (0.9,)}}))[sft] != k0[sft]
    )
    assert keys(dataclasses.replace(base, sets={"grpo": {"beta": 0.5}}))[sft] == k0[sft]
    env = {"JACRL_GRPO_CALIBRATION_FLOOR": "0.9"}  # the environment's, as `jacrl train grpo`
    assert keys(base, env)[sft] != keys(base, {})[sft]


def test_sft_configs_nest_where_the_table_says():
    assert _stage_cells("sft") == {"sft", "sft_grpo", "sft_rft", "star"}
    assert {
        s
        for s, st in STAGES.items()
        if any(f.type in (SFTConfig, "SFTConfig") for f in dataclasses.fields(st.config))
    } == {"rft", "star"}
