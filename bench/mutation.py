"""Mutation testing of the modules every number rests on (`make mutation`; docs/mutation.md).

mutmut (pinned in the Makefile) puts small, compiling bugs into each module of MODULES, one
module at a time in its own copy of the project (build/mutation/<module>/, so editing the tree
meanwhile changes nothing), and runs, for each mutant, those of the module's fast test files that
call the function it changed (mutmut records which test calls which function in one traced run).
pyproject.toml's [tool.mutmut] holds what the modules' runs share. A module with more than
`--cap` mutants is scored on a seeded sample of that many (the score says so). Mutants listed in
bench/mutation_equivalent.txt (one per line: name, then why no test can tell it from the
original) count as neither killed nor survived.

Writes bench/results/mutation.json and .txt after each module: the mutants, the sample, killed (a
test failed, or it timed out), survived, and the score killed / (sample - equivalent), with the
load average and the commit. Usage: python bench/mutation.py [--modules stats,ruler/reward]
[--cap 50] [--retest]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "results"
EQUIVALENT = ROOT / "bench" / "mutation_equivalent.txt"
MUTMUT = str(Path(sys.executable).parent / "mutmut")
# Each module and the fast test files that exercise it: mutmut runs, for each mutant, those of
# these tests that call the function it changed. Tests are filed by subject
# (tests/test_<module>.py); where a module's run takes only some tests of a file (the rest are
# slow, or test another module), they are named one by one.


def tests_in(path: str, *names: str) -> list[str]:
    """pytest node ids of the tests `names` in `path`."""
    return [f"{path}::{name}" for name in names]


def selection(*parts: str | list[str]) -> list[str]:
    """The parts as one list of pytest arguments, without a node id whose file is already
    there whole."""
    flat = [p for part in parts for p in ([part] if isinstance(part, str) else part)]
    whole = {p for p in flat if "::" not in p}
    out: list[str] = []
    for p in flat:
        if p not in out and (p in whole or p.split("::")[0] not in whole):
            out.append(p)
    return out


# The contracts every number rests on (docs/mutation.md), filed with their subjects: each module's
# run takes all of them, as it took their one file (tests/test_contracts.py) before
CONTRACTS = [
    *tests_in(
        "tests/test_reward.py",
        "test_whitespace_inside_a_line_is_not_an_exact_match",
        "test_default_formula_value_for_a_hand_built_case",
        "test_line_match_counts_lines_by_position",
        "test_nothing_run_scores_nothing_and_says_why",
        "test_one_answer_per_completion_or_one_for_all",
        "test_a_body_of_exactly_max_body_characters_is_run",
        "test_the_formula_asked_for_is_the_formula_used",
    ),
    *tests_in(
        "tests/test_extract.py",
        "test_first_fenced_block_is_the_body_when_a_fenced_example_follows",
        "test_the_unit_is_found_by_name_then_by_where_it_sits",
        "test_thinking_closed_at_the_very_start_is_dropped",
    ),
    "tests/test_splits.py::test_check_splits_reports_a_leaky_split",
    "tests/test_cell_keys.py::test_every_eval_and_grpo_knob_a_cells_rows_depend_on_changes_its_key",
    "tests/test_grpo.py::test_the_loss_receives_group_advantages",
    "tests/test_jsonl.py::test_append_fsyncs_the_line_it_wrote",
    "tests/test_seeds.py::test_bootstrap_draws_tasks_as_well_as_seeds",
]
# Contracts that mutants survived (docs/mutation.md), filed with their subjects: each module's
# run takes all of them, as it took their one file before
MORE = [
    *tests_in(
        "tests/test_extract.py",
        "test_two_brackets_opened_on_one_line_are_two_levels_for_dedent",
        "test_a_stray_closer_closes_one_bracket_for_dedent",
        "test_everything_up_to_the_last_think_close_is_thinking",
        "test_a_backtick_fence_with_a_backtick_in_its_info_is_not_a_fence_a_tilde_one_is",
        "test_a_whole_unit_with_a_braced_decorator_is_unwrapped_at_its_own_brace",
        "test_splice_says_how_many_hole_lines_a_bad_template_has",
        "test_a_single_quoted_string_left_open_ends_at_its_line",
        "test_a_replacement_field_spans_lines_and_a_runaway_one_ends_at_its_line",
        "test_strings_nested_in_a_replacement_field_are_strings",
        "test_a_header_inside_brackets_finds_its_body",
        "test_a_position_after_every_brace_is_inside_nothing",
        "test_enclosing_blocks_of_positions_at_inside_and_after_braces",
    ),
    *tests_in(
        "tests/test_executor.py",
        "test_a_job_that_compiled_and_completed_is_ok",
        "test_each_way_a_job_ends_has_its_status",
        "test_the_verdict_keeps_the_first_stderr_lines_only",
        "test_a_job_is_over_its_cpu_only_when_killed_for_it",
    ),
    *tests_in(
        "tests/test_splits.py",
        "test_sources_are_picked_until_every_family_is_held_and_no_further",
        "test_unsourced_holdout_gets_a_missing_family_first_and_never_all_tasks",
        "test_valid_takes_from_the_largest_family_first",
        "test_build_writes_loads_and_reports_the_splits_of_its_own_data_dir",
        "test_a_pool_of_five_from_one_family_is_flagged",
        "test_a_pool_whose_first_five_span_two_families_passes",
        "test_the_report_names_each_rung_and_every_problem",
        "test_the_default_data_dir_is_the_projects",
    ),
    *tests_in(
        "tests/test_jsonl.py",
        "test_write_and_append_make_missing_folders",
        "test_appending_after_a_whole_last_line_warns_of_nothing",
        "test_a_line_with_bytes_that_are_not_utf8_is_read_with_replacements",
        "test_the_last_line_start_is_found_at_offset_one_of_a_long_file",
        "test_a_torn_line_warning_never_points_into_jsonl",
        "test_records_are_written_as_utf8_whatever_the_locale",
    ),
    *tests_in(
        "tests/test_provenance.py",
        "test_rows_verdict_tells_same_noise_changed_and_unknown",
        "test_adapter_key_is_the_manifests_key_or_empty",
    ),
]
GRPO = tests_in(
    "tests/test_grpo.py",
    "test_a_steps_rollout_rows_and_record",
    "test_a_draw_decodes_every_prompt_and_scores_its_rollouts",
    "test_a_draw_is_decode_of_its_requests_all_in_one_batch",
    "test_a_steps_signal_share_keeps_four_places",
    "test_prompt_batches_are_seeded_epochs_of_whole_batches",
    "test_fill_batch_keeps_groups_with_signal_and_fills_from_the_latest",
    "test_fill_batch_keeps_groups_with_signal_and_caps_the_draws",
    "test_the_loss_receives_group_advantages",
)
MODULES = {
    "stats": ["tests/test_stats.py"],
    "ruler/reward": selection(
        "tests/test_reward.py",
        CONTRACTS,
        "tests/test_reward_never_raises.py::test_extraction_failure_costs_one_completion_and_says_why",
        "tests/test_reward_never_raises.py::test_a_body_over_max_body_is_not_run_and_says_why",
    ),
    "ruler/extract": selection("tests/test_extract.py", CONTRACTS, MORE),
    "ruler/jacsyntax": selection("tests/test_extract.py", "tests/test_reward.py", MORE),
    "tasks/splits": selection("tests/test_splits.py", CONTRACTS, MORE),
    "jsonl": selection("tests/test_jsonl.py", CONTRACTS, MORE),
    "report/seeds": selection("tests/test_seeds.py", CONTRACTS),
    "report/compare": selection("tests/test_seeds.py", CONTRACTS),
    "ladder/eval_cache": ["tests/test_eval_cache.py"],
    "train/checkpoint": ["tests/test_checkpoint.py"],  # the resumed GRPO cells rest on it
    "report/graded": selection(
        tests_in(
            "tests/test_report.py",
            "test_graded_measures_and_their_intervals",
            "test_graded_table_pools_a_lines_training_seeds",
            "test_show_marks_a_grpo_cell_without_signal_or_update",
            "test_rows_made_before_the_signal_record_are_marked_by_their_adapter",
            "test_the_training_table_has_a_line_per_seed",
        ),
        "tests/test_seeds.py::test_graded_comparisons_pair_seeds_and_tasks_where_pass1_is_zero",
        CONTRACTS,
    ),
    "train/grpo_rollouts": [
        "tests/test_train.py::test_advantage_variants_on_hand_made_groups",
        *CONTRACTS,
        *GRPO,
    ],
    "train/grpo_loss": [
        *tests_in(
            "tests/test_grpo.py",
            "test_our_loss_equals_mlx_lm_loras",
            "test_an_unknown_loss_type_is_refused",
            "test_a_groups_width_is_a_bucket_and_its_logps_are_the_models",
            "test_checkpointing_is_set_per_training_and_falls_back",
        ),
        *GRPO,
    ],
    "results": ["tests/test_evaluate.py", "tests/test_samples.py"],
    "ladder/plan": selection(
        CONTRACTS,
        "tests/test_ladder_formats.py::test_a_hole_cell_keys_and_names_as_before",
        "tests/test_cell_keys.py",
        "tests/test_stages.py::test_a_key_holds_only_the_code_its_stage_imports",
        "tests/test_stages.py::test_a_cells_code_is_its_stages_and_its_runners",
        "tests/test_ladder_plan.py",
    ),
    "tasks/record": selection(
        "tests/test_tasks.py::test_corpus_composition",
        "tests/test_tasks.py::test_bad_drivers_are_rejected_and_nothing_is_written",
        "tests/test_tasks.py::test_build_errors_name_the_real_cause",
        tests_in(
            "tests/test_tasks.py",
            "test_the_answer_record_carries_family_and_timeout",
            "test_meta_is_the_parsed_answer_or_the_one_already_read",
            "test_a_failure_is_its_exception_line_or_its_exit_code",
            "test_read_tasks_defaults_to_the_projects_tasks_file",
            "test_a_fixed_timeout_is_the_cap_and_otherwise_a_step_of_the_rule",
            "test_a_gold_body_that_fails_only_in_the_template_is_named_with_why",
        ),
        "tests/test_timeouts.py::test_the_rule_and_the_stored_values",
        MORE,
    ),
    "executor/client": selection(
        tests_in(
            "tests/test_executor.py",
            "test_environment_is_minimal",
            "test_nothing_leaks_between_jobs",
            "test_dedup_cache_runs_identical_programs_once",
            "test_timeouts_are_not_cached",
            "test_server_death_is_an_error_then_recovers",
            "test_a_program_sees_only_path_lang_and_home",
            "test_an_explicit_allow_unsandboxed_wins_over_the_environment",
            "test_a_lower_isolation_asked_for_is_refused_with_its_reason",
            "test_the_isolation_level_is_the_one_in_force",
            "test_a_verdict_from_the_cache_says_so",
            "test_an_unsandboxed_server_keeps_the_hash_seed_it_is_given",
            "test_a_skipped_verdict_is_a_fault_and_the_job_is_resubmitted",
            "test_a_verdict_for_a_job_one_past_the_last_is_a_fault",
            "test_two_failed_attempts_are_counted_in_the_plural",
            "test_one_timeout_per_program_or_an_error_saying_how_many",
            "test_the_server_leads_its_own_session_and_kill_takes_its_tree",
            "test_a_server_that_fails_to_start_is_named_by_its_last_stderr_line",
            "test_a_server_that_closes_its_output_but_lingers_is_reported_without_waiting_for_it",
            "test_a_request_to_a_server_that_never_reads_times_out",
        ),
        MORE,
    ),
    "executor/server": MORE,
    "code_graph": [
        "tests/test_code_graph.py",
        "tests/test_stages.py::test_a_key_holds_only_the_code_its_stage_imports",
    ],
    "provenance": selection(
        "tests/test_code_graph.py",
        "tests/test_evaluate.py::test_code_version_ignores_comments_and_docstrings",
        "tests/test_evaluate.py::test_code_version_changes_with_the_code_of_a_listed_module",
        "tests/test_evaluate.py::test_code_version_covers_the_result_modules",
        "tests/test_report.py::test_a_row_matching_the_disk_is_fresh",
        "tests/test_report.py::test_foreign_model_hash_and_changed_tasks_are_stale",
        "tests/test_provenance.py",
        MORE,
    ),
    "evaluate": selection(
        tests_in(
            "tests/test_evaluate.py",
            "test_grade_counts_known_completions",
            "test_grade_deploy_is_not_an_oracle",
            "test_grade_greedy_only",
            "test_append_and_read_rows_roundtrip",
            "test_a_sampled_evaluation_row",
            "test_a_greedy_evaluation_has_temperature_0_and_no_tasks_is_refused",
            "test_percentages_keep_two_decimals_and_none_of_nothing",
            "test_a_tasks_family_is_its_own_or_its_ids_first_word",
            "test_grading_no_tasks_gives_zeros_not_an_error",
            "test_one_sample_per_task_is_a_best_of_one",
        ),
        MORE,
    ),
}
# Tests deselected in every module's run: each checks that a warning points at the calling
# test's own line, which under mutmut is a trampoline in mutmut's file (between the caller and
# the module). Their twins, that the warning never points into the module, run there instead.
CALLER_LINE = (
    "tests/test_jsonl.py::test_a_torn_line_warning_names_the_callers_line",
    "tests/test_reward.py::test_an_extraction_warning_names_the_line_that_asked_for_the_scores",
    "tests/test_evaluate.py::test_a_torn_line_dropped_for_a_cells_rows_is_reported_at_the_callers_line",
)
# Modules scored on some functions only: executor/server's judging. The rest of server.py runs
# in the server process the client starts inside the sandbox (and in its zygote's forks), which
# mutmut's switch does not reach: its mutants would count as survivors no test could kill there.
FOCUS = {"executor/server": ("verdict", "_over_cpu")}
# mutmut runs in a copy of the project per module (so editing the tree meanwhile changes
# nothing) and mutates a copy of that in its mutants/ folder
WORK = ROOT / "build" / "mutation"
COPY = (
    "jacrl",
    "tests",
    "drivers",
    "data",
    "models",
    "results",
    "notebooks",
    "figures",
    "README.md",
    "jacrl.toml",
)
KILLED = ("killed", "timeout")  # a test failed, or the mutant never finished
PROBE = "jacrl.__mutation_list_only__"  # matches no mutant: generate them, run nothing


def modules() -> dict[str, str]:
    """{module: its file}, in MODULES' order ('report/seeds' -> 'jacrl/report/seeds.py')."""
    return {m: f"jacrl/{m}.py" for m in MODULES}


def focused(mod: str, name: str) -> bool:
    """Whether mutant `name` is in `mod`'s FOCUS (every mutant where it has none)."""
    funcs = FOCUS.get(mod)
    return not funcs or name.rsplit(".", 1)[-1].split("__mutmut_")[0] in {f"x_{f}" for f in funcs}


def work_config(mod: str) -> str:
    """pyproject.toml for one module's run: ours, with [tool.mutmut] naming that module and
    its tests."""
    text = (ROOT / "pyproject.toml").read_text()
    extra = (
        f"only_mutate = {json.dumps([modules()[mod]])}\n"
        f"pytest_add_cli_args_test_selection = {json.dumps(MODULES[mod])}\n"
    )
    deselect = "".join(f'"--deselect", {json.dumps(t)}, ' for t in CALLER_LINE)
    text = text.replace("pytest_add_cli_args = [", "pytest_add_cli_args = [" + deselect, 1)
    return text.replace("[tool.mutmut]\n", "[tool.mutmut]\n" + extra, 1)


def equivalents() -> dict[str, str]:
    out = {}
    for line in EQUIVALENT.read_text().splitlines() if EQUIVALENT.exists() else []:
        if line.strip() and not line.startswith("#"):
            name, _, why = line.partition(" ")
            out[name] = why.strip()
    return out


def mutmut(work: Path, *args: str, log) -> int:
    return subprocess.run(
        [MUTMUT, *args],
        cwd=work,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    ).returncode


def verdicts(work: Path, path: str) -> dict[str, str]:
    """{mutant: status} from mutmut's record of one module."""
    from mutmut.stats import status_by_exit_code

    meta = work / "mutants" / f"{path}.meta"
    codes = json.loads(meta.read_text())["exit_code_by_key"] if meta.exists() else {}
    return {k: status_by_exit_code[v] for k, v in codes.items()}


def prepare(mod: str, fresh: bool) -> Path:
    """The module's copy of the project (build/mutation/<module>/), its config written."""
    work = WORK / mod.replace("/", ".")
    if fresh:
        shutil.rmtree(work, ignore_errors=True)
    skip = shutil.ignore_patterns("__pycache__", "*.lock", ".pytest_cache")
    for name in COPY:
        src, dst = ROOT / name, work / name
        if src.is_dir():
            shutil.copytree(src, dst, ignore=skip, dirs_exist_ok=True)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
    (work / "pyproject.toml").write_text(work_config(mod))
    return work


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    ap.add_argument("--modules", default="", help="comma list (default: every one of MODULES)")
    ap.add_argument("--cap", type=int, default=50, help="most mutants run per module")
    ap.add_argument("--seed", type=int, default=0, help="the sample's seed")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--out", type=Path, default=OUT, help="where mutation.json/.txt go")
    ap.add_argument(
        "--retest",
        action="store_true",
        help="rerun only the mutants not killed yet (after new tests, or to finish a stopped run)",
    )
    args = ap.parse_args(argv)
    mods = modules()
    chosen = [m.strip() for m in args.modules.split(",") if m.strip()] or list(mods)
    unknown = set(chosen) - set(mods)
    if unknown:
        sys.exit(f"bench/mutation.py: not in MODULES: {sorted(unknown)}")
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    equiv = equivalents()
    load0, t0 = os.getloadavg(), time.time()
    # the modules not run now keep their last record (each says its commit)
    last = (
        json.loads((out / "mutation.json").read_text()) if (out / "mutation.json").exists() else {}
    )
    record = {
        "tool": f"mutmut {_version()}",
        "cap": args.cap,
        "seed": args.seed,
        "jobs": args.jobs,
        "commit": _commit(),
        "cpus": os.cpu_count(),
        # every module keeps its last record until it is run again: a run stopped before it
        # leaves it as it was
        "modules": {
            m: {"commit": last.get("commit", "?"), **r} for m, r in last.get("modules", {}).items()
        },
    }
    if args.retest and last.get("commit"):  # the run whose survivors these are
        record["first_run"] = last.get("first_run") or {
            k: last[k] for k in ("commit", "seconds", "load_before", "load_after")
        }
    for mod in chosen:
        work = prepare(mod, fresh=not args.retest)
        with open(work / "mutation.log", "a") as log:
            if not args.retest:  # generate the mutants (no name matches: nothing runs)
                mutmut(work, "run", "--max-children", str(args.jobs), PROBE, log=log)
            names = sorted(n for n in verdicts(work, mods[mod]) if focused(mod, n))
            if not names:
                sys.exit(f"bench/mutation.py: no mutants of {mod}; see {log.name}")
            sample = (
                sorted(random.Random(f"{args.seed}:{mod}").sample(names, args.cap))
                if len(names) > args.cap
                else names
            )
            t = time.time()
            before = verdicts(work, mods[mod])
            rerun = [n for n in sample if before[n] not in KILLED] if args.retest else sample
            if rerun:
                mutmut(work, "run", "--max-children", str(args.jobs), *rerun, log=log)
        got = verdicts(work, mods[mod])
        status = {n: got[n] for n in sample}
        if all(s == "not checked" for s in status.values()):
            sys.exit(f"bench/mutation.py: mutmut checked no mutant of {mod}; see {log.name}")
        eq = sorted(n for n in sample if n in equiv and status[n] not in KILLED)
        killed = sum(s in KILLED for s in status.values())
        survivors = sorted(n for n, s in status.items() if s not in KILLED and n not in equiv)
        judged = len(sample) - len(eq)
        earlier = last.get("modules", {}).get(mod, {}).get("seconds", 0) if args.retest else 0
        record["modules"][mod] = {
            "tests": MODULES[mod],
            "commit": record["commit"],
            "mutants": len(names),
            "sampled": len(sample),
            "killed": killed,
            "equivalent": len(eq),
            "survived": len(survivors),
            "score": round(killed / judged, 4) if judged else None,
            "seconds": round(time.time() - t + earlier, 1),
            "retested": len(rerun) if args.retest else 0,
            "not_killed": {n: status[n] for n in survivors},
        }
        print(
            f"{mod:20s} {killed}/{judged} killed ({killed / max(judged, 1):.1%}) of "
            f"{len(sample)} sampled from {len(names)}",
            flush=True,
        )
        save(record, t0, load0, out)  # after each module: a stopped run keeps what it measured
    print(table(record), end="")
    return 0


def save(record: dict, t0: float, load0: tuple, out: Path = OUT) -> None:
    record |= {
        "seconds": round(time.time() - t0, 1),
        "load_before": [round(x, 2) for x in load0],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }
    (out / "mutation.json").write_text(json.dumps(record, indent=1) + "\n")
    (out / "mutation.txt").write_text(table(record))


def _commit() -> str:
    """HEAD's short hash, with "+" when the tree has changes (a worktree's .git is a file)."""

    def git(*a: str) -> str:
        return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True).stdout

    return git("rev-parse", "--short", "HEAD").strip() + (
        "+" if git("status", "--porcelain", "--", "jacrl", "tests").strip() else ""
    )


def _version() -> str:
    from importlib.metadata import version

    return version("mutmut")


def table(record: dict) -> str:
    """The per-module table (Markdown), as docs/mutation.md shows it."""
    lines = [
        "| module | mutants | run | killed | equivalent | survived | score | s | commit |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for mod, r in record["modules"].items():
        run = f"{r['sampled']}" + (" (sample)" if r["sampled"] < r["mutants"] else "")
        lines.append(
            f"| {mod} | {r['mutants']} | {run} | {r['killed']} | {r['equivalent']} | "
            f"{r['survived']} | {100 * r['score']:.1f} % | {r['seconds']:.0f} | "
            f"{r.get('commit', record['commit'])} |"
        )
    lines.append(
        f"\n{record['tool']}, last run at commit {record['commit']}, {record['jobs']} "
        f"jobs on "
        f"{record['cpus']} CPUs, {record['seconds']:.0f} s, load average "
        f"{record['load_before'][0]} before / {record['load_after'][0]} after; sample "
        f"cap {record['cap']} per module, seed {record['seed']}."
    )
    if "first_run" in record:
        f = record["first_run"]
        lines.append(
            f"The mutants not killed by the run at commit {f['commit']} "
            f"({f['seconds']:.0f} s, load average {f['load_before'][0]} / "
            f"{f['load_after'][0]}) were rerun here, after tests that kill them "
            "were added."
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
