"""Tables and figures from result rows (results/rl_ladder.jsonl): the ladder pivot with Wilson
intervals, learning curves with CI bands, paired exact McNemar of each condition against base, and
training curves from an artifact's metrics.jsonl; and hole-fill vs conversion on the same tasks
(`format_comparison`: Wilson intervals and paired exact McNemar).

A row belongs to a ladder cell through its `model_name`, `rung`, `condition` and `kind` fields, or,
for rows without them (the reference harness's), through a four-part tag
`r<N>/<model>/<cond>/<kind>`.
A row's task format is its `format` field (`hole` when absent) and `paired` says it comes from a
plan with conversion cells (only the ids that have a conversion task; `jacrl.ladder.cell_tasks`).
When several rows share (model, rung, condition, format, paired, kind) the last one wins (as in
the earlier harness). Tables label a condition `sft` (hole-fill), `sft/hole` (hole-fill, paired)
or `sft/conversion`. Wilson intervals are recomputed from the counts (`pass1`/`tasks`), never
copied from a row.

| column | meaning |
|---|---|
| `pass1_pct`, `ci_lo`, `ci_hi` | greedy exact pass rate and its 95 % Wilson interval (percent) |
| `passk_pct`, `k` | unbiased pass@k (Chen et al. 2021) at the row's largest k, from its |
|   | `pass_at_k` (percent); NaN when no samples were drawn; never `greedy_or_k_pct` |
| `tasks`, `pass1` | tasks graded and greedy exact passes of the row |
| `run_pct`, `near_pct`, `avg_osim`, `truncation_pct` | as in the row (see `jacrl.evaluate`) |
| `model`, `rung`, `condition`, `format`, `paired`, `kind`, `cell_key` | the row's ladder cell |
| `mem` | (pivot) the mem row's greedy pass rate on the rung's own training tasks |
| `stale` | why a row no longer describes what is on disk ("" when it does): its model, |
|   | adapter (another artifact key) or tasks changed since it was made |
| `rebuilt` | the row's adapter folder holds a rebuild of the same key with other weights |
|   | (training noise, same inputs): kept, and said |

Provenance is enforced, not just recorded: `show_text` leaves stale rows out (and says how many)
unless asked to include them; `stale_reasons` compares each row's recorded model, adapter and
task-data hashes with the files on disk now. Figures are never older than their rows: every
figure written (`write_figures`, `write_training_figure`, through `stamp.save_figure`) holds, in
its own file, each source file's path, sha256, row count and the code versions its rows carry;
`figure_stale_reasons` / `stale_figures` flag a figure whose source changed or is missing, or
that has no such record (`ladder show` lists them).

    rows.py     a row's cell and task format (`cell_of`, `variant_of`), labels, orders
    stamp.py    the provenance inside a figure file: `source_stamp`, `save_figure`,
                `save_formats`, `read_stamp`
    stale.py    `stale_reasons`, `mark_stale`; `figure_stale_reasons`, `stale_figures`,
                `figures_note`
    seeds.py    aggregation over training seeds (`train_seed`): `seed_summary` (mean pass@1, each
                seed's, a seeds x tasks bootstrap interval; Wilson with one seed), `seed_table`
    compare.py  `seed_comparisons` (paired by seed and task id, on pass@1 or a graded measure),
                `comparison_table`, `graded_comparison_table`
    settings.py the settings a row was made with (`settings_of`), rows picked by them
                (`where_rows`: `ladder show --where n=8`), mixed settings flagged (`mixed_lines`)
    tables.py   `frame`, `pivot`, `ladder_table`, `mcnemar_vs_base`, `format_comparison`,
                `show_text`
    grpo.py     what a GRPO run did per step, from its rollouts.jsonl and step events:
                `tier_table`, `plot_tiers`, `last_groups`, `step_timings`, `plot_timings`
    families.py the per-family breakdown: `family_table`, `plot_families`
    figures.py  `plot_curves`, `plot_formats`, `write_figures` (each figure as PNG, SVG and
                PDF), the training curves (matplotlib)
"""

from jacrl.report.compare import (
    COMPARE_COLUMNS,
    comparison_table,
    graded_comparison_table,
    paired_stat,
    seed_comparisons,
)
from jacrl.report.families import family_table, plot_families
from jacrl.report.figures import (
    plot_curves,
    plot_formats,
    plot_training,
    plot_training_runs,
    write_figures,
    write_training_figure,
)
from jacrl.report.grpo import (
    last_groups,
    plot_tiers,
    plot_timings,
    rollouts,
    step_events,
    step_timings,
    tier_table,
)
from jacrl.report.rows import (
    COND_ORDER,
    FORMAT_ORDER,
    cell_of,
    condition_label,
    format_of,
    load_rows,
    variant_of,
)
from jacrl.report.seeds import (
    SEED_COLUMNS,
    bootstrap_means,
    seed_stat,
    seed_summary,
    seed_table,
    train_seed,
)
from jacrl.report.settings import mixed_lines, settings_of, where_folder, where_rows
from jacrl.report.stale import (
    figure_stale_reasons,
    figures_note,
    mark_stale,
    stale_figures,
    stale_reasons,
)
from jacrl.report.stamp import read_stamp, save_figure, save_formats, source_stamp
from jacrl.report.tables import (
    COLUMNS,
    FORMAT_COLUMNS,
    fmt_cell,
    format_comparison,
    format_table,
    frame,
    labels,
    ladder_table,
    mcnemar_vs_base,
    pivot,
    show_text,
)

__all__ = [
    "COLUMNS",
    "COND_ORDER",
    "FORMAT_COLUMNS",
    "FORMAT_ORDER",
    "cell_of",
    "condition_label",
    "figure_stale_reasons",
    "figures_note",
    "fmt_cell",
    "format_comparison",
    "format_of",
    "format_table",
    "frame",
    "labels",
    "ladder_table",
    "last_groups",
    "load_rows",
    "mark_stale",
    "mcnemar_vs_base",
    "pivot",
    "plot_curves",
    "plot_formats",
    "plot_timings",
    "plot_tiers",
    "plot_training",
    "plot_training_runs",
    "read_stamp",
    "rollouts",
    "save_figure",
    "show_text",
    "source_stamp",
    "stale_figures",
    "stale_reasons",
    "step_events",
    "step_timings",
    "tier_table",
    "variant_of",
    "write_figures",
    "write_training_figure",
    "mixed_lines",
    "settings_of",
    "where_folder",
    "where_rows",
    "family_table",
    "plot_families",
    "save_formats",
    "COMPARE_COLUMNS",
    "SEED_COLUMNS",
    "bootstrap_means",
    "comparison_table",
    "graded_comparison_table",
    "paired_stat",
    "seed_comparisons",
    "seed_stat",
    "seed_summary",
    "seed_table",
    "train_seed",
]
