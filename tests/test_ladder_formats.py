"""Task format as a ladder dimension: `--formats hole,conversion` plans hole-fill and Python -> Jac
conversion cells over the same task ids (paired), a hole-only plan keeps its cells' names and keys,
and the report compares the formats side by side (Wilson intervals, exact McNemar). The proof: a
scoped ladder run with both formats on jac-tiny (real papermill, real MLX) whose rows pair up."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest
from tiny_ladder import tiny_ladder_args

from jacrl import ladder, report, results
from jacrl.cli import build_parser, main
from jacrl.cli.ladder import config_from_args
from jacrl.notebooks import QUICK_SETS
from jacrl.provenance import data_hash
from jacrl.samples import read_samples
from jacrl.stats import mcnemar_exact, wilson
from jacrl.tasks import splits
from jacrl.tasks.record import meta, read_conversion

ROOT = Path(__file__).resolve().parent.parent


def _args(*argv: str):
    return build_parser().parse_args(["ladder", *argv])


def _ids(tasks: list[dict]) -> list[str]:
    return [meta(t)["id"] for t in tasks]


# -------------------------------------------------------------------------------------------
# the knob, the plan, the keys (nothing runs)
# -------------------------------------------------------------------------------------------


def test_formats_knob_env_flag_and_errors():
    cfg = ladder.from_env(ladder.LadderConfig(), {"JACRL_LADDER_FORMATS": "hole,conversion"})
    assert cfg.formats == ("hole", "conversion") and ladder.paired_plan(cfg)
    assert ladder.LadderConfig().formats == ("hole",)
    assert not ladder.paired_plan(ladder.validate(ladder.LadderConfig()))
    cfg = config_from_args(
        _args("plan", "--formats", "conversion"), {"JACRL_LADDER_FORMATS": "hole"}
    )
    assert cfg.formats == ("conversion",)  # the flag wins over the env
    for bad in ("hole,nope", "hole,hole"):
        with pytest.raises(ValueError, match="each once, of hole, conversion"):
            ladder.from_env(ladder.LadderConfig(), {"JACRL_LADDER_FORMATS": bad})
    with pytest.raises(ValueError, match="unknown task format 'python'"):
        ladder.notebook_cell(rung="1", format="python")


def test_a_hole_cell_keys_and_names_as_before(data_dir):
    """Format enters a cell's key parts, key text and name only when it is not plain hole-fill:
    a hole cell's key is the sha256 of exactly the parts it had before formats existed."""
    one = {
        "rung": "1",
        "model": "jac-tiny",
        "condition": "sft",
        "data_dir": data_dir,
        "sft_iters": 4,
        "gen_limit": 3,
    }
    hole = ladder.notebook_cell(**one)
    assert ladder.notebook_cell(**one, format="hole", paired="False").key == hole.key
    assert set(hole.key_parts) == {
        "rung",
        "model",
        "model_hash",
        "condition",
        "seed",
        "sft",
        "reads",
        "eval",
        "data_hash",
        "code_version",
        "notebook",
    }
    digest = hashlib.sha256(json.dumps(hole.key_parts, sort_keys=True).encode()).hexdigest()
    assert hole.key == f"r1-jac-tiny-sft-{digest[:12]}"
    assert hole.name == "r1/jac-tiny/sft" and hole.tag("gen") == "r1/jac-tiny/sft/gen"
    assert (hole.format, hole.paired) == ("hole", False)
    planned = json.loads(hole.to_json())
    assert planned["format"] == "hole" and planned["paired"] is False
    paired = ladder.notebook_cell(**one, paired=True)
    assert paired.key_parts["paired"] is True and paired.key != hole.key
    assert paired.name == hole.name  # a hole cell keeps its name
    conv = ladder.notebook_cell(**one, format="conversion")
    assert conv.key_parts["format"] == "conversion" and conv.paired  # conversion is paired
    assert conv.key.startswith("r1-jac-tiny-sft-conversion-")
    assert conv.name == "r1/jac-tiny/sft/conversion"
    assert conv.tag("mem") == "r1/jac-tiny/sft/conversion/mem"
    assert ladder.notebook_cell(**one, format="conversion", paired="True").key == conv.key


def test_a_plan_with_both_formats_trains_and_evaluates_the_same_ids(data_dir, tmp_path):
    """Every (rung, condition) has a hole and a conversion cell over the very same ids: rung N =
    the first N train-pool ids that have a conversion task, gen = the hole-fill holdout's such ids
    (file-disjoint from the pool), mem = the rung's; conversion swaps in the conversion records
    (another prompt, the same answer). A hole-only plan is untouched by the formats axis."""
    base = ladder.LadderConfig(
        rungs=("1", "3"),
        models=("jac-tiny",),
        conditions=("base", "sft"),
        gen_limit=5,
        data_dir=data_dir,
        results_dir=str(tmp_path / "r"),
    )
    hole_only = ladder.plan(base)
    both = ladder.plan(dataclasses.replace(base, formats=("hole", "conversion")))
    assert [c.name for c in both] == [
        n for c in hole_only for n in (c.name, f"{c.name}/conversion")
    ]
    assert len({c.key for c in both}) == len(both)
    assert not {c.key for c in both} & {c.key for c in hole_only}  # paired hole cells re-keyed
    assert all(c.paired for c in both) and not any(c.paired for c in hole_only)
    conv_ids = {meta(t)["id"] for t in read_conversion(data_dir)}
    hold_ids = set(_ids(splits.load_split("holdout", data_dir)))
    pool = [i for i in _ids(splits.load_split("trainpool", data_dir)) if i in conv_ids]
    pool_sources = {meta(t)["source"] for t in splits.load_split("trainpool", data_dir)}
    for hole, conv in zip(both[::2], both[1::2], strict=True):
        assert (hole.format, conv.format) == ("hole", "conversion")
        assert (hole.rung, hole.condition) == (conv.rung, conv.condition)
        e = hole.eval
        h = ladder.cell_tasks(hole.rung, data_dir, e["gen_limit"], e["mem_limit"], "hole", True)
        c = ladder.cell_tasks(conv.rung, data_dir, e["gen_limit"], e["mem_limit"], "conversion")
        for split in ("train", "valid", "gen", "mem"):
            assert _ids(h[split]) == _ids(c[split]) and set(_ids(h[split])) <= conv_ids, split
            for ht, ct in zip(h[split], c[split], strict=True):
                assert ct["answer"] == ht["answer"] and ct["prompt"] != ht["prompt"]
                assert "```python" in ct["prompt"] and "```python" not in ht["prompt"]
        assert _ids(h["train"]) == pool[: int(hole.rung)]
        assert len(h["gen"]) == 5 and set(_ids(h["gen"])) <= hold_ids
        assert not {meta(t)["source"] for t in h["gen"]} & pool_sources  # file-disjoint
    # the hole-only plan's cells are what they always were
    for cell in hole_only:
        plain = ladder.cell_tasks(cell.rung, data_dir, 5)
        assert _ids(plain["train"]) == _ids(splits.rung(cell.rung, data_dir))
        assert _ids(plain["gen"]) == _ids(
            ladder.stratified(splits.load_split("holdout", data_dir), 5)
        )


# -------------------------------------------------------------------------------------------
# the report (synthetic rows; no model)
# -------------------------------------------------------------------------------------------


def _row(key, cond, kind, fmt, passed, paired=True, model="m", rung="1"):
    per_task = [{"id": f"t{i}", "greedy_exact": bool(p)} for i, p in enumerate(passed)]
    row = {
        "tag": f"r{rung}/{model}/{cond}/{kind}",
        "cell_key": key,
        "model_name": model,
        "rung": rung,
        "condition": cond,
        "kind": kind,
        "tasks": len(passed),
        "pass1": sum(passed),
        "pass_at_k": {},
        "per_task": per_task,
    }
    if fmt is not None:
        row.update(format=fmt, paired=paired)
    return row


def test_format_comparison_reproduces_the_statistics(tmp_path, capsys):
    hole = [1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0]  # 5/12
    conv = [1, 1, 0, 1, 1, 1, 1, 1, 0, 0, 1, 1]  # 9/12: 1 hole-only, 5 conversion-only
    rows = [
        _row("a", "sft", "gen", None, [0] * 12),  # unpaired hole-fill (another plan): not compared
        _row("b", "sft", "gen", "hole", hole),
        _row("c", "sft", "gen", "conversion", conv),
        _row("b", "sft", "mem", "hole", [1]),
        _row("c", "sft", "mem", "conversion", [0]),
        _row("d", "base", "gen", "hole", [0] * 12),
        _row("e", "base", "gen", "conversion", [1] + [0] * 11),
    ]
    fc = report.format_comparison(rows)
    assert [(r.condition, r.kind) for r in fc.itertuples()] == [
        ("base", "gen"),
        ("sft", "gen"),
        ("sft", "mem"),
    ]
    got = fc[(fc.condition == "sft") & (fc.kind == "gen")].iloc[0]
    m = mcnemar_exact([bool(x) for x in hole], [bool(x) for x in conv])
    assert (got.n, got.hole_pass, got.conv_pass, got.hole_only, got.conv_only) == (12, 5, 9, 1, 5)
    assert (got.hole_only, got.conv_only, got.p) == (m["b"], m["c"], round(m["p"], 4))
    for side, k in (("hole", 5), ("conv", 9)):
        lo, hi = wilson(k, 12)
        assert (got[f"{side}_lo"], got[f"{side}_hi"]) == (round(100 * lo, 2), round(100 * hi, 2))
        assert got[f"{side}_pct"] == round(100 * k / 12, 2)
    assert fc.same_ids.all()
    # rows without `format` read as hole-fill; tables label the variants apart
    assert report.format_of(rows[0]) == "hole" and report.variant_of(rows[0]) == ("hole", False)
    df = report.frame(rows)
    assert sorted(zip(df.condition, df.format, df.paired, df.kind, strict=True))[:2] == [
        ("base", "conversion", True, "gen"),
        ("base", "hole", True, "gen"),
    ]
    assert list(report.ladder_table(rows).index.get_level_values("condition")) == [
        "base/hole",
        "base/conversion",
        "sft",
        "sft/hole",
        "sft/conversion",
    ]
    mc = report.mcnemar_vs_base(rows)  # each format against its own base
    assert list(mc.condition) == ["sft/hole", "sft/conversion"]
    assert list(mc.gained) == [5, 8] and list(mc.lost) == [0, 0]
    res = tmp_path / "results"
    results.append_cell_rows(res / ladder.RESULTS_FILE, rows[1:])
    assert main(["ladder", "show", "--results", str(res), "--figures", str(tmp_path / "f")]) == 0
    out = capsys.readouterr().out
    assert "hole-fill vs conversion on the same task ids" in out
    line = next(ln for ln in out.splitlines() if " sft " in ln and "gen" in ln and "41.7" in ln)
    assert "41.7 [19-68]" in line and "75.0 [47-91]" in line and f"{round(m['p'], 4)}" in line
    assert (tmp_path / "f" / "formats.png").stat().st_size > 1000
    assert report.format_comparison(rows[:1]).empty  # nothing paired: no comparison, no figure
    assert [p.name for p in report.write_figures(rows[:1], tmp_path / "g")] == [
        "ladder.png",
        "ladder_passk.png",
    ]


def test_a_conversion_row_is_checked_against_the_conversion_tasks(data_dir):
    """Staleness compares a conversion row's data hash with data/conversion.jsonl, not with the
    hole-fill tasks of the same ids."""
    recs = read_conversion(data_dir)[:3]
    row = {
        "format": "conversion",
        "per_task": [{"id": meta(t)["id"]} for t in recs],
        "provenance": {"data_hash": data_hash(recs)},
    }
    assert report.stale_reasons(row) == []
    assert report.stale_reasons({**row, "format": "hole"}) == ["tasks changed"]


# -------------------------------------------------------------------------------------------
# the proof: a scoped ladder run with both formats (real papermill, jac-tiny)
# -------------------------------------------------------------------------------------------


def test_a_ladder_run_with_both_formats_pairs_its_rows(tiny, data_dir, tmp_path, capsys):
    res, figs = tmp_path / "results", tmp_path / "figures"
    # both quick sets: the grpo one sizes the sft cells' mem calibration (rollouts at 16 tokens)
    quick = {stage: QUICK_SETS[stage] for stage in ("sft", "grpo")}
    argv = tiny_ladder_args(
        tmp_path, "1", "base,sft", model=tiny, gen_limit=3, iters="3", sets=quick, data=data_dir
    )
    argv += ["--formats", "hole,conversion"]
    cells = ladder.plan(config_from_args(_args("run", *argv)))
    assert [c.name for c in cells] == [
        "r1/jac-tiny/base",
        "r1/jac-tiny/base/conversion",
        "r1/jac-tiny/sft",
        "r1/jac-tiny/sft/conversion",
    ]
    assert main(["ladder", "run", *argv]) == 0
    rows = report.load_rows(res / ladder.RESULTS_FILE)
    assert sorted((r["cell_key"], r["kind"]) for r in rows) == sorted(
        (c.key, k) for c in cells for k in ("gen", "mem")
    )
    conv_by_id = {meta(t)["id"]: t for t in read_conversion(data_dir)}
    by = {(r["condition"], r["format"], r["kind"]): r for r in rows}
    for cond in ("base", "sft"):
        for kind, n in (("gen", 3), ("mem", 1)):
            hole, conv = by[(cond, "hole", kind)], by[(cond, "conversion", kind)]
            ids = [t["id"] for t in hole["per_task"]]
            assert ids == [t["id"] for t in conv["per_task"]] and len(ids) == n
            assert hole["paired"] and conv["paired"] and set(ids) <= set(conv_by_id)
            assert conv["provenance"]["data_hash"] == data_hash([conv_by_id[i] for i in ids])
            assert hole["provenance"]["data_hash"] != conv["provenance"]["data_hash"]
    sft_train = {r["ladder"]["artifacts"]["sft"] for r in rows if r["condition"] == "sft"}
    assert len(sft_train) == 2  # one SFT artifact per format
    for r in rows:  # every cell keeps its completions beside its row (path: from the rows' dir)
        header, samples = read_samples(res / r["samples"])
        assert r["samples"] == f"cells/{r['cell_key']}/samples-{r['kind']}.jsonl.gz"
        assert len(samples) == len(r["per_task"]) * (1 + r["n"])

    assert main(["ladder", "show", "--results", str(res), "--figures", str(figs)]) == 0
    out = capsys.readouterr().out
    assert "hole-fill vs conversion on the same task ids" in out
    fc = report.format_comparison(rows)
    assert len(fc) == 4 and fc.same_ids.all() and list(fc.n) == [3, 3, 1, 1]
    for r in fc.itertuples():
        h, c = by[(r.condition, "hole", r.kind)], by[(r.condition, "conversion", r.kind)]
        m = mcnemar_exact(
            [t["greedy_exact"] for t in h["per_task"]], [t["greedy_exact"] for t in c["per_task"]]
        )
        assert (r.hole_pass, r.conv_pass) == (h["pass1"], c["pass1"])
        assert (r.hole_only, r.conv_only, r.p) == (m["b"], m["c"], round(m["p"], 4))
    assert (figs / "formats.png").stat().st_size > 1000
