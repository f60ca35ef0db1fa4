"""The ladder: cells = rungs x models x conditions, each one papermill run of
notebooks/30_training.ipynb, whose executed copy is kept as the cell's record.

    plan.py   LadderConfig, the conditions, `plan`: every cell resolved, with its key
    taskset.py  which tasks a cell trains and evaluates on (`cell_tasks`), in which format
    cell.py   what notebook 30 runs for one cell: `notebook_cell`, `train_cell`, `evaluate_cell`
    run.py    `run` (papermill per cell, locks, status files), `plan_text`, `show`
    recipe_run.py  `run_recipe`, `recipe_plan_text`: the compute-smart recipe (`jacrl.recipe`)
              in stages, each stage's cells run by an engine (default: `run`)
    demo.py   the demo: a small ladder on jac-tiny, its table and figures

The commands are `jacrl ladder plan | run | show` and `jacrl demo` (`jacrl.cli.ladder`).

Conditions: `base` (the model as is), `sft` (gold SFT on the rung's tasks), `sft_grpo` (GRPO
continuing the sft adapter — the same content-addressed SFT artifact the sft cell trained),
`raw_grpo` (GRPO on the base), and `sft_grpo_tuned`, not in the default list: sft_grpo with
GRPO learning rate 1e-5 and 2.5x the GRPO iterations (the reference's hand-made tuned run).

Formats (`--formats hole,conversion`, the innermost axis): `hole` (hole-fill: the instruction and
the template, the default) and `conversion` (Python -> Jac: the function's Python sidecar and the
template, `jacrl.conversion`; same answer and grading). A plan with conversion cells is *paired*:
all its cells, hole-fill ones included, train and evaluate only the ids that have a conversion
task (rung N = the first N such ids of the train pool; gen = the hole-fill holdout's such ids,
file-disjoint as ever), so `jacrl.report.format_comparison` pairs hole and conversion on the same
ids (exact McNemar). A hole-only plan is unchanged: its cells, names and keys are as before.

Each cell evaluates `gen` (the holdout, greedy + n samples) and `mem` (the rung's own tasks,
greedy) and appends one row per evaluation to results/rl_ladder.jsonl, only at the end of the
cell, each row one write + fsync, under a lock, skipping (cell key, kind) pairs already there
(`jacrl.results.append_cell_rows`).

Cell key = sha256 of everything that defines the cell: rung, model (name + file hashes),
condition, seed, the resolved SFT/GRPO hyperparameters (iterations and, for GRPO conditions, the
reward formula included; base and sft cells do not depend on the formula), the evaluation
settings, the hash of the tasks it trains/validates/evaluates on, the code version
(`jacrl.provenance.code_version`) and the training notebook's code. `make_cell` computes it; the
ladder passes it to the notebook as `cell_key`, and the rows are filed under it. `run` skips a
cell only when rows with its key exist for both kinds; a cell killed mid-way (even SIGKILL) has
no rows, so it runs again. Its directory results/cells/<key>/ holds 30_training.ipynb
(executed), log.txt, status.json (running | done | failed, with the error) and the artifacts'
metrics.jsonl.

Scoping: flags, else JACRL_LADDER_RUNGS / _MODELS / _CONDITIONS (comma lists) and
JACRL_LADDER_ITERS ("50" for both stages, or "sft=50,grpo=20"). Hyperparameters: the
`jacrl.config` dataclasses' defaults (the GRPO reward formula's is JACRL_REWARD_FORMULA, else
tiered), then JACRL_SFT_* / JACRL_GRPO_* env vars, then the ladder's iterations, seed and
`--reward-formula`, then the condition's own overrides, then `--set sft.KEY=V` /
`--set grpo.KEY=V`. The resolved formula is passed to the notebook as a parameter and recorded
in each row (`reward_formula`).
"""

from jacrl.ladder.cell import (
    adapter_of,
    evaluate_cell,
    notebook_cell,
    notebook_params,
    train_cell,
)
from jacrl.ladder.demo import DEMO_GRPO, DEMO_SFT, demo, demo_config, ensure_data, training_runs
from jacrl.ladder.plan import (
    CONDITIONS,
    DEFAULT_CONDITIONS,
    NOTEBOOK,
    RESULTS_FILE,
    Cell,
    Condition,
    LadderConfig,
    comma_list,
    from_env,
    make_cell,
    paired_plan,
    parse_iters,
    plan,
    rung_sft_iters,
    stage_configs,
    validate,
)
from jacrl.ladder.recipe_run import (
    Engine,
    RecipeRun,
    local_engine,
    recipe_config,
    recipe_plan_text,
    run_recipe,
)
from jacrl.ladder.run import (
    cell_dir,
    cell_state,
    command,
    interrupted_cells,
    plan_text,
    read_status,
    run,
    run_cell,
    show,
)
from jacrl.ladder.taskset import FORMATS, cell_tasks, stratified

__all__ = [
    "CONDITIONS", "DEFAULT_CONDITIONS", "DEMO_GRPO", "DEMO_SFT", "FORMATS", "NOTEBOOK",
    "RESULTS_FILE",
    "Cell", "Condition", "Engine", "LadderConfig", "RecipeRun", "adapter_of", "cell_dir",
    "cell_state", "cell_tasks",
    "command", "comma_list", "demo", "demo_config", "ensure_data", "evaluate_cell", "from_env",
    "interrupted_cells", "make_cell", "notebook_cell", "notebook_params", "paired_plan",
    "parse_iters", "plan",
    "plan_text", "read_status", "rung_sft_iters", "run", "run_cell", "show", "stage_configs",
    "stratified", "train_cell", "training_runs", "validate",
    "local_engine", "recipe_config", "recipe_plan_text", "run_recipe",
]
