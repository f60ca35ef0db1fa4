"""The ladder: cells = rungs x models x conditions, each one papermill run of
notebooks/30_training.ipynb, whose executed copy is kept as the cell's record.

    settings.py  LadderConfig, its JACRL_LADDER_* overrides (`from_env`), `validate`
    plan.py   `Cell` (a LadderConfig, the cell's pick of its grid, its stages' typed configs, its
              key; `to_json`/`from_json`), `make_cell(cfg, rung, model, condition, format)`,
              `plan` (every cell; trained ones once per `train_seeds` seed)
    taskset.py  which tasks a cell trains and evaluates on (`cell_tasks`), in which format
    cell.py   what notebook 30 runs for one cell: `notebook_cell`, `train_cell`, `evaluate_cell`
    status.py   a cell's directory, status file, lock and state (shared by the engines)
    run.py    `Engine`, `local_engine` (papermill per cell), `run`, `plan_text`, `show`
    ray_cell.py, ray_engine.py  the Ray engine (`ray_engine`; the optional `ray` extra)
    recipe_run.py  `run_recipe`, `recipe_plan_text`: the compute-smart recipe (`jacrl.recipe`)
              in stages, each stage's cells run by an engine (default: `local_engine`)
    demo.py   the demo: a small ladder on jac-tiny, its table and figures

The commands are `jacrl ladder plan | run | show` and `jacrl demo` (`jacrl.cli.ladder`).

Conditions (`jacrl.conditions`, data: each its stages in order and its overrides): `base` (the
model as is), `sft` (gold SFT on the rung's tasks), `sft_grpo` (GRPO continuing the sft adapter —
the same content-addressed SFT artifact the sft cell trained), `raw_grpo` (GRPO on the base);
not in the default list: `sft_grpo_tuned` (sft_grpo with the GRPO learning rate x10 and
iterations x2, the recipe's tuned arm), `sft_rft` (RFT sampling from the sft adapter), `star`
(STaR: gold SFT, then rounds of verified samples) and `sft_dpo` (DPO continuing the sft adapter);
`jacrl ladder --help` lists them from the table.

Formats (`--formats hole,conversion`, the innermost axis): `hole` (hole-fill: the instruction and
the template, the default) and `conversion` (Python -> Jac: the function's Python sidecar and the
template, `jacrl.tasks.conversion`; same answer and grading). A plan with conversion cells is
*paired*: all its cells, hole-fill ones included, train and evaluate only the ids that have a
conversion task (rung N = the first N such ids of the train pool; gen = the hole-fill holdout's such
ids, file-disjoint as ever), so `jacrl.report.format_comparison` pairs hole and conversion on the
same ids (exact McNemar). A hole-only plan is unchanged: its cells, names and keys are as before.

Each cell evaluates `gen` (the holdout, greedy + n samples) and `mem` (the rung's own tasks,
greedy) and appends one row per evaluation to results/rl_ladder.jsonl, only at the end of the
cell, each row one write + fsync, under a lock, skipping (cell key, kind) pairs already there
(`jacrl.results.append_cell_rows`).

Cell key = sha256 of exactly what the cell's rows are made from: rung, model (name + file
hashes), condition, the evaluation seed, each stage's resolved hyperparameters (its seed the
cell's training seed; iterations and, for grading stages, the reward formula included), the
configs its evaluation reads (`jacrl.stages` `eval_reads`: an sft, sft_rft or star cell's mem
temperature is calibrated with the cell's GRPO settings), the evaluation settings, the hash of
the tasks it trains/validates/evaluates on, the code its runner and stages import
(`jacrl.provenance.code_of`) and the training notebook's code (tests/test_cell_keys.py).
`make_cell` computes it; the ladder hands the notebook the whole cell, its key included, as one
parameter (`cell_json`), and the rows are filed under it. `run` skips a cell only when rows with
its key exist for both kinds; a cell killed mid-way (even SIGKILL) has no rows, so it runs again.
Its directory results/cells/<key>/ holds 30_training.ipynb (executed), log.txt, status.json
(running | done | failed, with the error) and the artifacts' metrics.jsonl.

Scoping: flags, else JACRL_LADDER_RUNGS / _MODELS / _CONDITIONS (comma lists) and
JACRL_LADDER_ITERS ("50" for both stages, or "sft=50,grpo=20"). Hyperparameters
(`stage_configs`, by `jacrl.stages.resolve` as `jacrl train` does): the `jacrl.config`
dataclasses' defaults, the ladder's reward formula (`--reward-formula`, else
JACRL_REWARD_FORMULA read by `from_env`, else the default formula), then JACRL_<STAGE>_* env
vars, then the ladder's iterations and seed, then `--set STAGE.KEY=V` (the ladder's `sets`,
{stage: {knob: value}}; any stage of `jacrl.stages`), then the condition's scales. The resolved
formula is part of the cell notebook 30 gets and is recorded in each row (`reward_formula`).

Training seeds (`--train-seeds 0,1,2`): every cell that trains is planned once per seed, each
its own key (`-s<seed>` in key and name unless it is `seed`), the evaluation sampling with `seed`
throughout; base is one cell. Rows carry `train_seed`; `jacrl.report` aggregates the replicates.

By hand (notebook 30 without `cell_json`): the parameters pick a cell and set LadderConfig
fields; the rows go to results/scratch/ unless `results_dir` is given, never the ladder's rows.
"""

from jacrl.conditions import CONDITIONS, DEFAULT_CONDITIONS, Condition
from jacrl.ladder.cell import (
    adapter_of,
    evaluate_cell,
    notebook_cell,
    notebook_params,
    train_cell,
)
from jacrl.ladder.demo import (
    DEMO_GRPO,
    DEMO_SFT,
    config_for,
    demo,
    demo_config,
    ensure_data,
    real_demo_config,
    reference_for,
    training_runs,
)
from jacrl.ladder.plan import Cell, make_cell, paired_plan, plan, rung_sft_iters, stage_configs
from jacrl.ladder.recipe_run import (
    RecipeRun,
    recipe_config,
    recipe_plan_text,
    run_recipe,
)
from jacrl.ladder.run import Engine, command, local_engine, plan_text, run, run_cell, show
from jacrl.ladder.settings import (
    NOTEBOOK,
    RESULTS_FILE,
    LadderConfig,
    comma_list,
    from_env,
    parse_iters,
    validate,
)
from jacrl.ladder.status import cell_dir, cell_state, interrupted_cells, read_status
from jacrl.ladder.taskset import FORMATS, cell_tasks, stratified

__all__ = [
    "CONDITIONS",
    "DEFAULT_CONDITIONS",
    "DEMO_GRPO",
    "DEMO_SFT",
    "FORMATS",
    "NOTEBOOK",
    "RESULTS_FILE",
    "Cell",
    "Condition",
    "Engine",
    "LadderConfig",
    "RecipeRun",
    "adapter_of",
    "cell_dir",
    "cell_state",
    "cell_tasks",
    "command",
    "comma_list",
    "demo",
    "demo_config",
    "real_demo_config",
    "config_for",
    "reference_for",
    "ensure_data",
    "evaluate_cell",
    "from_env",
    "interrupted_cells",
    "make_cell",
    "notebook_cell",
    "notebook_params",
    "paired_plan",
    "parse_iters",
    "plan",
    "plan_text",
    "read_status",
    "rung_sft_iters",
    "run",
    "run_cell",
    "show",
    "stage_configs",
    "stratified",
    "train_cell",
    "training_runs",
    "validate",
    "local_engine",
    "recipe_config",
    "recipe_plan_text",
    "run_recipe",
]
