"""The compute-smart recipe: instead of the blind grid, four stages, each deciding what the next
one runs.

    stage 0  gate   sft on the first rung (rung 1 by default), every model; its mem eval (greedy,
                    the rung's own tasks) must reach `gate_threshold`, else the recipe stops
    stage 1  curve  base + sft on every rung, every model (the cheap SFT curve)
    stage 2  elbow  no cells: per model, the elbow rung E of the sft curve (`elbow`)
    stage 3  grpo   at E: sft_grpo (the default arm) and sft_grpo_tuned (the condition of
                    `jacrl.conditions`: the default arm's learning rate x10, iterations x2); plus
                    one raw_grpo control on the first rung

`decide` holds the gate and the elbow rule (its cases are documented there), `steps` the cells
of each stage (the recipe's steps, called stages in its records; not `jacrl.stages`' training
stages), `record` the decision record and the plan text. Everything is a pure function of
the ladder's configuration (any object with its fields: rungs, models, grpo_iters, sets,
...), a `RecipeConfig` and the result rows so far; nothing here runs a cell. The runner
(`jacrl.ladder.run_recipe`, `jacrl ladder run --recipe smart`) loops over the stages::

    for stage in STEPS:
        specs = stage_cells(stage.number, cfg, rows, rcfg)   # [] once the gate has not passed
        # one ladder cell per spec (spec.sets(cfg) = its `sets` field); run those without
        # rows; then re-read the rows of the recipe's cells: rows = rows_for(all_rows, keys)
        write_record(results_dir, build_record(cfg, rows, rcfg, keys))
        if (why := stop_reason(cfg, rows, rcfg)) is not None:
            print(why)
            break

Rows are the only state: a re-run recomputes every decision from them, so it resumes where it
stopped (finished cells keep their rows and are skipped) and rewrites the record. Pass only the
rows of the recipe's own cells (`rows_for` with their cell keys): rows are matched to cells by
(model label, rung, condition, kind), so rows of another configuration on the same cells would be
read too.
"""

from jacrl.recipe.decide import (
    DEMO_GATE_THRESHOLD,
    DEMO_RECIPE,
    GATE_THRESHOLD,
    RULE,
    RULE_TEXT,
    Elbow,
    Gate,
    RecipeConfig,
    curve,
    elbow,
    elbows,
    first_rung,
    gate,
    index_rows,
    ordered_rungs,
    parse_elbow,
    rows_for,
)
from jacrl.recipe.record import (
    RECIPE,
    build_record,
    plan_key,
    plan_text,
    read_record,
    read_records,
    record_path,
    record_text,
    stages,
    write_record,
)
from jacrl.recipe.steps import (
    STEPS,
    CellSpec,
    Step,
    planned_cells,
    stage_cells,
    stop_reason,
)

__all__ = [
    "DEMO_GATE_THRESHOLD",
    "DEMO_RECIPE",
    "GATE_THRESHOLD",
    "RECIPE",
    "RULE",
    "RULE_TEXT",
    "STEPS",
    "CellSpec",
    "Elbow",
    "Gate",
    "RecipeConfig",
    "Step",
    "build_record",
    "curve",
    "elbow",
    "elbows",
    "first_rung",
    "gate",
    "index_rows",
    "ordered_rungs",
    "parse_elbow",
    "plan_key",
    "plan_text",
    "planned_cells",
    "read_record",
    "read_records",
    "record_path",
    "record_text",
    "rows_for",
    "stage_cells",
    "stages",
    "stop_reason",
    "write_record",
]
