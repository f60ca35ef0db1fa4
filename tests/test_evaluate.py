"""jacrl.evaluate: metrics from known completions (real jaclang), a real MLX eval row on jac-tiny;
seeded generation; the append-only results file (jacrl.results); the code hash
(jacrl.provenance); the eval CLI's parsers."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest

from jacrl import evaluate as ev
from jacrl import provenance
from jacrl.cli import evaluate as eval_cli
from jacrl.config import EvalConfig
from jacrl.generate import generate
from jacrl.models import load
from jacrl.results import RowsError, append_row, read_rows, rows_by_key
from jacrl.stats import pass_at_k, wilson

ROOT = Path(__file__).resolve().parent.parent


def _documented_fields() -> set[str]:
    """The row fields `jacrl.evaluate`'s docstring lists (one or more names at the start of a
    line indented 4 spaces, before their description)."""
    lines = re.finditer(r"^    (\w+(?:, \w+)*)(?= |$)", ev.__doc__, re.M)
    return {name for m in lines for name in m.group(1).split(", ")}


def gold(task) -> str:
    return "```jac\n" + json.loads(task["answer"])["gold"] + "\n```"


def wrong_output(task) -> str:
    """A body that runs but prints nothing useful (the unit returns early / does nothing)."""
    return "```jac\nprint('nope');\n```"


def test_grade_counts_known_completions(harness_tasks):
    tasks = harness_tasks[:4]
    greedy = [gold(tasks[0]), gold(tasks[1]), "no code here", "```jac\n}}}{{{\n```"]
    # 4 samples per task: task0 all right; task1 2 right (not first); task2 first garbage then gold;
    # task3 nothing right
    samples = [
        [gold(tasks[0])] * 4,
        ["junk", gold(tasks[1]), "junk", gold(tasks[1])],
        ["junk", gold(tasks[2]), "junk", "junk"],
        ["junk"] * 4,
    ]
    m = ev.grade(tasks, greedy, samples, k=(1, 2, 4, 8))
    assert m["tasks"] == 4 and m["pass1"] == 2 and m["pass1_pct"] == 50.0
    assert m["runs"] >= 2 and m["near_pass"] >= 2 and m["norm_pass"] >= 2
    assert m["k"] == 4 and set(m["pass_at_k"]) == {"1", "2", "4"}  # 8 > n is dropped
    correct = [4, 2, 1, 0]
    assert [p["samples_correct"] for p in m["per_task"]] == correct
    for kk in (1, 2, 4):
        want = 100 * sum(pass_at_k(4, c, kk) for c in correct) / 4
        assert m["pass_at_k"][str(kk)] == pytest.approx(want, abs=0.01)
    assert m["greedy_or_k"] == 3  # greedy or any of the first 4 samples
    lo, hi = wilson(2, 4)
    assert (m["wilson_lo"], m["wilson_hi"]) == (round(100 * lo, 2), round(100 * hi, 2))
    # best-of-k: first sample that RUNS, in sample order; "junk" does not run
    assert [p["deploy"] for p in m["per_task"]][:3] == [True, True, True]
    assert m["bestofk"]["deploy"] == 3 and m["bestofk"]["oracle"] == 3
    assert sum(t for _, t in m["by_family"].values()) == 4


def test_grade_deploy_is_not_an_oracle(harness_tasks):
    """A sample that runs with the wrong output comes first: deploy takes it (no gold peeking)."""
    task = harness_tasks[0]
    m = ev.grade([task], ["junk"], [[wrong_output(task), gold(task)]], k=(2,))
    p = m["per_task"][0]
    assert p["samples_ran"] == 2  # the wrong body runs (prints the wrong thing) in this template
    assert p["deploy"] is False and m["bestofk"]["oracle"] == 1
    assert m["pass1"] == 0 and m["greedy_or_k"] == 1


def test_grade_greedy_only(harness_tasks):
    m = ev.grade(harness_tasks[:2], [gold(t) for t in harness_tasks[:2]])
    assert m["pass1"] == 2 and m["k"] == 1 and m["pass_at_k"] == {} and m["bestofk"] is None
    assert m["avg_osim"] == 1.0 and m["near_pct"] == 100.0


def test_evaluate_row_schema_on_tiny(tiny, harness_tasks):
    tasks = harness_tasks[:2]
    cfg = EvalConfig(n=2, temperature=0.8, k=(1, 2), seed=0, max_tokens=48)
    row = ev.evaluate(tiny, None, tasks, cfg, tag="test/tiny", split="harness", kind="gen")
    assert set(row) == _documented_fields()  # the fields the module documents, no other
    assert row["tasks"] == 2 and row["n"] == 2 and row["k"] == 2
    assert row["isolation"] == "sandbox"
    assert 0 <= row["wilson_lo"] <= row["pass1_pct"] <= row["wilson_hi"] <= 100
    assert set(row["pass_at_k"]) == {"1", "2"}
    assert len(row["per_task"]) == 2 and all("samples_correct" in p for p in row["per_task"])
    prov = row["provenance"]
    for key in (
        "git_commit",
        "code_version",
        "jaclang",
        "mlx",
        "mlx-lm",
        "model_hash",
        "data_hash",
        "time",
    ):
        assert key in prov
    assert prov["model_hash"] and prov["data_hash"] == provenance.data_hash(tasks)
    assert row["model"] and row["adapter"] == "" and row["samples"] == ""  # none kept
    json.dumps(row)  # serializable
    # fixed seed: the same call gives the same samples
    again = ev.evaluate(tiny, None, tasks, cfg)
    assert [p["samples_correct"] for p in again["per_task"]] == [
        p["samples_correct"] for p in row["per_task"]
    ]


def test_generate_is_seeded_and_reports_truncation(tiny, harness_tasks):
    lm, tok = load(tiny)
    prompts = [harness_tasks[0]["prompt"]]
    a = generate(lm, tok, prompts, n=3, temperature=1.0, max_tokens=16, seed=7)
    b = generate(lm, tok, prompts, n=3, temperature=1.0, max_tokens=16, seed=7)
    assert [s.text for s in a[0]] == [s.text for s in b[0]]
    assert all(s.tokens <= 16 for s in a[0])
    assert all(s.truncated == (s.tokens == 16) for s in a[0])


def test_samples_share_their_prompts_prefill_and_budgets_are_per_prompt(tiny, harness_tasks):
    """n > 1 samples of a prompt decode from one prefilled cache: greedy, every copy is what a
    lone greedy decode gives; a list of budgets is one per prompt."""
    lm, tok = load(tiny)
    prompts = [t["prompt"] for t in harness_tasks[:2]]
    alone = generate(lm, tok, prompts, n=1, temperature=0.0, max_tokens=[12, 5])
    shared = generate(lm, tok, prompts, n=3, temperature=0.0, max_tokens=[12, 5])
    for one, three in zip(alone, shared, strict=True):
        assert [s.text for s in three] == [one[0].text] * 3
    assert all(s.tokens <= 5 for s in shared[1]) and alone[1][0].tokens <= 5
    with pytest.raises(ValueError, match="2 token budgets for 1 prompts"):
        generate(lm, tok, prompts[:1], n=1, max_tokens=[3, 4])


def test_append_and_read_rows_roundtrip(tmp_path):
    path = tmp_path / "deep" / "results.jsonl"
    rows = [{"tag": "a", "pass1": 1, "by_family": {"lib": [1, 2]}}, {"tag": "b", "x": "ü"}]
    for r in rows:
        append_row(path, r)
    assert read_rows(path) == rows
    assert path.read_text().count("\n") == 2


def test_torn_last_line_is_ignored_and_next_append_drops_it(tmp_path):
    path = tmp_path / "results.jsonl"
    append_row(path, {"tag": "ok"})
    with open(path, "a") as f:
        f.write('{"tag": "torn", "pass1"')  # a crash mid-write
    with pytest.warns(UserWarning, match="torn last line 2"):
        assert read_rows(path) == [{"tag": "ok"}]
    with pytest.warns(UserWarning, match="dropped a torn last line 2"):
        append_row(path, {"tag": "after"})  # starts on its own line, the torn one gone
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no note left: the file is whole
        assert read_rows(path) == [{"tag": "ok"}, {"tag": "after"}]
    # a whole row that only lacks its newline (written by hand) is kept, not dropped
    with open(path, "a") as f:
        f.write('{"tag": "hand"}')
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        append_row(path, {"tag": "last"})
        assert [r["tag"] for r in read_rows(path)] == ["ok", "after", "hand", "last"]


def test_corrupt_middle_line_is_an_error_naming_file_and_line(tmp_path):
    path = tmp_path / "results.jsonl"
    for tag in ("a", "b"):
        append_row(path, {"tag": tag})
    lines = path.read_text().splitlines()
    path.write_text(f'{lines[0]}\n{{"tag": "x" "y"}}\n{lines[1]}\n')  # a bad hand edit
    with pytest.raises(
        RowsError,
        match=rf"^{re.escape(str(path))}:2: corrupt line, not a JSON "
        r"row \(Expecting ',' delimiter at column 13\)",
    ):
        read_rows(path)
    path.write_text(f"{lines[0]}\n[1, 2]\n{lines[1]}\n")  # JSON, but not a row
    with pytest.raises(RowsError, match=r":2: corrupt line, not a JSON row \(a JSON list"):
        read_rows(path)
    with pytest.raises(RowsError, match=":2: corrupt line"):  # the ladder's resume reads it too
        rows_by_key(path)


def _ladder_rows(tmp_path, tail: str):
    """results/rl_ladder.jsonl in tmp_path: two of the committed ladder rows, then `tail`."""
    committed = (ROOT / "results" / "rl_ladder.jsonl").read_text().splitlines()[:2]
    res = tmp_path / "results"
    res.mkdir()
    (res / "rl_ladder.jsonl").write_text("\n".join(committed) + "\n" + tail)
    return res


def test_ladder_show_exits_2_on_a_corrupt_middle_line(tmp_path, capsys):
    from jacrl.cli import main

    committed = (ROOT / "results" / "rl_ladder.jsonl").read_text().splitlines()
    res = _ladder_rows(tmp_path, '{"tag": "r1/jac-tiny/sft/gen", "tasks": 4,\n' + committed[2])
    fig = tmp_path / "fig"
    assert main(["ladder", "show", "--results", str(res), "--figures", str(fig)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"jacrl: ladder show: {res / 'rl_ladder.jsonl'}:3: corrupt line, not a JSON row"
    )
    assert not fig.exists()  # no figures from a damaged file


def test_ladder_show_skips_a_torn_last_line_with_a_note(tmp_path, capsys):
    from jacrl.cli import main

    res = _ladder_rows(tmp_path, '{"tag": "r1/jac-tiny/sft/gen", "tasks": 4, "pa')
    with pytest.warns(UserWarning, match="torn last line 3"):
        assert (
            main(["ladder", "show", "--results", str(res), "--no-figures", "--include-stale"]) == 0
        )  # stale or not: the rows are read and shown
    assert capsys.readouterr().out.startswith("gen pass@1")


def test_cli_parsers_build():
    import argparse

    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="verb")
    eval_cli.add(sub)
    args = ap.parse_args(
        ["eval", "--model", "jac-tiny", "--split", "holdout", "-n", "4", "-k", "1,4", "--out", ""]
    )
    assert args.func is eval_cli.run_eval and args.n == 4 and args.k == "1,4"
    args = ap.parse_args(["generate", "--id", "x", "-k", "3"])
    assert args.func is eval_cli.run_generate and args.k == 3
    # one default per knob: EvalConfig's
    cfg = EvalConfig()
    for verb in (["eval"], ["generate"]):
        args = ap.parse_args(verb)
        assert (args.temperature, args.seed, args.max_tokens) == (
            cfg.temperature,
            cfg.seed,
            cfg.max_tokens,
        )
    assert ap.parse_args(["eval"]).batch_size == cfg.batch_size


def _package(tmp_path, files: dict[str, str]):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return provenance.code_version(tmp_path, ("reward", "train"))


def test_code_version_ignores_comments_and_docstrings(tmp_path):
    code = {
        "reward.py": '"""Doc."""\nX = 1\n\ndef f(a):\n    """Doc."""\n    return a + X\n',
        "train/__init__.py": "",
        "train/sft.py": "class S:\n    y = 2\n",
        "cli.py": "print(1)\n",
    }
    before = _package(tmp_path, code)
    assert before == provenance.code_version(tmp_path, ("reward", "train"))
    edited = dict(code)
    edited["reward.py"] = (
        '"""Another doc."""\n# a comment\nX = 1  # one\n\n\n'
        'def f(a):\n    """Other."""\n    # why\n    return a + X\n'
    )
    edited["train/sft.py"] = 'class S:\n    """Now documented."""\n\n    y = 2\n'
    edited["cli.py"] = "print(2)\n"  # not a listed module
    assert _package(tmp_path, edited) == before


def test_code_version_changes_with_the_code_of_a_listed_module(tmp_path):
    code = {"reward.py": "X = 1\n", "train/__init__.py": "", "train/grpo.py": "Y = 2\n"}
    before = _package(tmp_path, code)
    assert _package(tmp_path, {**code, "reward.py": "X = 2\n"}) != before
    assert (
        _package(tmp_path, {**code, "reward.py": "X = 1\n", "train/grpo.py": "Y = 3\n"}) != before
    )
    assert (
        _package(tmp_path, {**code, "train/grpo.py": "Y = 2\n", "train/rft.py": "Z = 1\n"})
        != before
    )


def test_code_version_covers_the_result_modules():
    names = {p.relative_to(provenance.PACKAGE).as_posix() for p in provenance.result_sources()}
    for module in ("evaluate.py", "generate.py", "prompts.py", "reward.py", "config.py"):
        assert module in names
    for module in ("report/", "ladder/", "cli/", "project.py", "kernel.py", "notebooks.py"):
        assert not [n for n in names if n.startswith(module)], module
    with pytest.raises(FileNotFoundError, match="RESULT_MODULES"):
        provenance.code_version(provenance.PACKAGE, ("no_such_module",))
