"""A cell's key sees every input of its rows, and nothing else: each field of `LadderConfig` and
of every stage config (through `sets`) is perturbed alone, a grid of every condition is planned
(no training), and each cell's key must change if and only if that field can change one of its
rows. What a field can change: a stage's knobs reach the cells that run the stage and the cells
whose stages nest its config (the stage table), and the cells whose evaluation is *observed* to
read it: each condition's cell is evaluated for real on jac-tiny while every stage config class
records the fields read on it (`observed`), so a table entry (`eval_reads`) that is wrong or
missing a field fails here rather than agreeing with itself. The same perturbation on main
8adcf00 left the sft key unchanged for a GRPO calibration knob (the bug this file pins down).
Also, on one sft_grpo cell: every evaluation and GRPO knob its rows depend on changes its key."""

from __future__ import annotations

import dataclasses
import shutil

import pytest
from quick import QUICK

from jacrl.conditions import CONDITIONS, condition_of
from jacrl.ladder import cell as cell_module
from jacrl.ladder.cell import evaluate_cell
from jacrl.ladder.plan import plan
from jacrl.ladder.settings import LadderConfig
from jacrl.models.registry import resolve
from jacrl.notebooks import QUICK_SETS
from jacrl.stages import STAGES

GRID = tuple(CONDITIONS)
ALL = set(GRID)
TRAINED = {c for c in GRID if condition_of(c).stages}

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


def _reading_cells(observed: dict, stage: str, name: str) -> set[str]:
    """The grid's cells whose evaluation was observed to read `stage`'s field `name`."""
    return {c for c in GRID if name in observed[c].get(stage, ())}


def _iters_cells(knob: str) -> set[str]:
    return set().union(*(_stage_cells(s) for s, st in STAGES.items() if st.iters == knob))


def _formula_cells(observed: dict) -> set[str]:
    grading = set().union(*(_stage_cells(s) for s, st in STAGES.items() if st.grades))
    return grading | set().union(*(_reading_cells(observed, s, "reward_formula") for s in STAGES))


def _observe(cell, arts) -> dict[str, set[str]]:
    """{stage: fields} of the configs beside the cell's own stages that evaluating it reads: while
    `evaluate_cell` runs (calibration included), every stage config class records each field read
    on its instances. A dry run: the grading `evaluate` (given the ladder's EvalConfig, no stage
    config) is replaced by a recorder that counts any stage config handed to it as read whole. A
    config read that is neither the cell's own stages' nor one of `cell.reads` fails."""
    seen = []

    def spy(self, name):
        if name in type(self).__dataclass_fields__:
            seen.append((self, name))
        return object.__getattribute__(self, name)

    def dry_evaluate(*args, **kwargs) -> dict:
        for a in (*args, *kwargs.values()):
            if type(a) in configs:
                seen.extend((a, f) for f in type(a).__dataclass_fields__)
        return {}

    configs = {st.config for st in STAGES.values()}
    with pytest.MonkeyPatch.context() as mp:
        for config in configs:
            mp.setattr(config, "__getattribute__", spy)
        mp.setattr(cell_module, "evaluate", dry_evaluate)
        evaluate_cell(cell, arts, progress=False)
    own = {id(c) for c in cell.stages.values()}
    own |= {id(getattr(c, n)) for s, c in cell.stages.items() for n in STAGES[s].nests}
    whose = {id(c): s for s, c in cell.reads.items()}
    out: dict[str, set[str]] = {}
    for obj, name in seen:
        if id(obj) not in own:
            assert id(obj) in whose, f"{cell.condition} read {type(obj).__name__}.{name}"
            out.setdefault(whose[id(obj)], set()).add(name)
    return out


@pytest.fixture(scope="module")
def observed(tiny, data_dir, tmp_path_factory) -> dict[str, dict[str, set[str]]]:
    """{condition: {stage: fields}} its cell's evaluation read of configs beside its own stages
    (`_observe`), for every condition of the table: one jac-tiny cell each, with one quick SFT
    adapter as every stage's artifact (the evaluation reads an artifact's adapter, and of a stage
    that samples rollouts the temperature its manifest records) and tiny evaluation settings."""
    from jacrl.ladder.taskset import cell_tasks
    from jacrl.train import sft

    d = tmp_path_factory.mktemp("observed")
    tasks = cell_tasks("1", data_dir)
    art = sft(tiny, tasks["train"][:1], None, QUICK, d / "a", log=lambda _: None)
    rolled = dataclasses.replace(art, manifest={**art.manifest, "summary": {"temperature": 0.7}})
    cfg = LadderConfig(
        rungs=("1",),
        conditions=GRID,
        data_dir=data_dir,
        results_dir=str(d / "r"),
        gen_limit=1,
        mem_limit=1,
        n=1,  # mem is sampled (at the calibrated temperature) only with n > 0
        k=(1,),
        max_tokens=16,
        # calibration: groups of 2, 16 tokens, one temperature (every field is still read)
        sets={"grpo": {**QUICK_SETS["grpo"], "temperature_grid": (1.0,)}},
    )
    out = {}
    for cell in plan(cfg):
        arts = {s: rolled if STAGES[s].calibrates else art for s in cell.stages}
        out[cell.condition] = _observe(cell, arts)
    return out


# LadderConfig field -> (its perturbed value, the cells it can change)
LADDER_INPUTS = {
    "formats": (("hole", "conversion"), ALL),  # hole cells become paired: other task ids
    "seed": (1, ALL),  # the evaluation's sampling seed (and the training seed)
    "train_seeds": ((1,), TRAINED),
    "sft_iters": (7, _iters_cells("sft_iters")),
    "grpo_iters": (7, _iters_cells("grpo_iters")),
    "sft_iters_per_task": (1, _iters_cells("sft_iters")),  # rung 1: min(200, 1 x its tasks)
    "reward_formula": ("tiered", None),  # grading cells and readers (`_formula_cells`)
    "gen_limit": (3, ALL),
    "mem_limit": (1, ALL),
    "n": (9, ALL),
    "k": ((1, 2), ALL),
    "temperature": (0.5, ALL),
    "max_tokens": (100, ALL),
    "budget_factor": (1.5, ALL),
    "decode_workers": (2, ALL),  # samples depend on the split (each worker its own stream)
    "grpo_prompts": ("pool", _stage_cells("grpo")),  # GRPO's prompts: only cells that run it
    "sets": None,  # every stage config's field, below
}

CHOICES = {  # by stage.knob, else knob
    "advantage": "std",
    "grpo.loss_type": "bnpo",
    "dpo.loss_type": "hinge",
    "lora_keys": "self_attn.v_proj",
    "reward_formula": "tiered",
    "best_by": "reward",
}
# a choice that is valid only with another knob moved too (DPO-Positive's penalty lives inside the
# sigmoid loss, so another loss needs it off); both belong to the same stage's cells
COMPANIONS = {"dpo.loss_type": {"dpop_lambda": 0.0}}


def _other(stage: str, name: str, value):
    """A valid value other than `value` for the knob `name` of `stage`."""
    for key in (f"{stage}.{name}", name):
        if key in CHOICES:
            return CHOICES[key]
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
                    yield stage, f"{f.name}.{g.name}", _other(stage, g.name, getattr(value, g.name))
            else:
                yield stage, f.name, _other(stage, f.name, value)


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


def test_a_cells_key_holds_exactly_the_fields_its_evaluation_reads(grid, observed):
    """For every condition: the configs its key holds beside its own stages (`reads`) are those
    its evaluation was observed to read, field for field (an sft cell: GRPO's calibration)."""
    base, _ = grid
    for cell in plan(base):
        held = {s: set(f) for s, f in cell.key_parts.get("reads", {}).items()}
        assert held == observed[cell.condition], cell.condition
    assert observed["sft"]["grpo"] and not observed["base"] and not observed["sft_grpo"]


def test_a_ladder_field_changes_exactly_the_keys_of_the_cells_it_feeds(grid, observed, tmp_path):
    base, keys = grid
    k0 = keys(base)
    assert len(set(k0.values())) == len(GRID)
    for name, spec in LADDER_INPUTS.items():
        if spec is None:
            continue
        value, want = spec
        want = _formula_cells(observed) if want is None else want
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
def test_a_stage_knob_changes_exactly_the_keys_of_the_cells_that_read_it(grid, observed, stage):
    base, keys = grid
    k0 = keys(base)
    for st, name, value in _knobs():
        if st != stage:
            continue
        top = name.partition(".")[0]
        want = _stage_cells(stage) | _reading_cells(observed, stage, top)
        if "." in name:  # a nested config's field (RFT's SFT): only this stage's own cells
            want = {c for c in GRID if stage in condition_of(c).stages}
        # a condition that scales this knob by 0 (sft_grpo_lr0's learning rate) pins it
        want -= {c for c in GRID if condition_of(c).scale.get(stage, {}).get(name) == 0}
        sets = {stage: {name: value, **COMPANIONS.get(f"{stage}.{name}", {})}}
        got = _changed(k0, keys(dataclasses.replace(base, sets=sets)))
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
    assert _stage_cells("sft") == ALL - {"base", "raw_grpo"}
    assert {s: st.nests for s, st in STAGES.items() if st.nests} == {
        "rft": {"sft": "sft"},
        "star": {"sft": "sft"},
    }


EVAL_PERTURBED = {
    "gen_limit": 3,
    "mem_limit": 1,
    "n": 9,
    "k": (1, 2),
    "temperature": 0.5,
    "max_tokens": 100,
    "budget_factor": 1.5,
    "decode_workers": 2,
}  # n 9: the default k (up to 8) still fits


def test_every_eval_and_grpo_knob_a_cells_rows_depend_on_changes_its_key(data_dir):
    from jacrl.config import EvalConfig, GRPOConfig
    from jacrl.ladder.plan import make_cell
    from jacrl.ladder.settings import LadderConfig

    base = LadderConfig(data_dir=data_dir, rungs=("1",), sft_iters=4, grpo_iters=4)
    # the evaluation knobs rows depend on: every EvalConfig field the ladder sets but the seed
    # (`seed`: every row's, tested by the ladder) and the decode batch (throughput only)
    shared = (
        {f.name for f in dataclasses.fields(EvalConfig)}
        & {f.name for f in dataclasses.fields(LadderConfig)}
    ) - {"seed", "batch_size"}
    assert shared | {"gen_limit", "mem_limit"} == set(EVAL_PERTURBED)

    def key(cfg, **kw):
        return make_cell(cfg, "1", condition="sft_grpo", env={}, log=lambda _: None, **kw).key

    k0 = key(base)
    for name, value in EVAL_PERTURBED.items():
        assert getattr(base, name) != value, name
        assert key(dataclasses.replace(base, **{name: value})) != k0, name
    assert key(dataclasses.replace(base, batch_size=base.batch_size + 1)) == k0
    # every GRPO knob (all of GRPOConfig) that a cell trains with
    defaults = GRPOConfig()
    for f in dataclasses.fields(GRPOConfig):
        if f.name in ("iters", "seed", "reward_formula"):  # the ladder's own knobs set them
            continue
        value = getattr(defaults, f.name)
        other = _other_value(f.name, value)
        cell = make_cell(
            dataclasses.replace(base, sets={"grpo": {f.name: other}}),
            "1",
            condition="sft_grpo",
            env={},
            log=lambda _: None,
        )
        assert getattr(cell.stages["grpo"], f.name) == other and cell.key != k0, f.name
    assert key(dataclasses.replace(base, grpo_iters=5)) != k0
    assert key(dataclasses.replace(base, reward_formula="additive")) != k0


def _other_value(name: str, value):
    choices = {"advantage": "std", "loss_type": "dr_grpo", "lora_keys": "self_attn.q_proj"}
    if name in choices:
        return choices[name]
    if isinstance(value, bool):
        return not value
    if isinstance(value, tuple):
        return value[:-1]
    if isinstance(value, float):
        return round(value / 2, 9) if value else 0.25
    return value + 1 if value >= 0 else 2
