"""jacrl.evaluate: metrics from known completions (real jaclang), a real MLX eval row on jac-tiny;
seeded generation; the append-only results file (jacrl.results); the code hash
(jacrl.provenance); the eval CLI's parsers. Then one real evaluation's row field by field, and
the result rows' contracts: a cell's rows appended once, a row's summary, model labels."""

from __future__ import annotations

import json
import re
import sys
import warnings
from pathlib import Path

import pytest

from jacrl import code_graph, provenance, results
from jacrl import evaluate as ev
from jacrl.cli import evaluate as eval_cli
from jacrl.config import EvalConfig
from jacrl.generate import Request, _shares, decode, decode_split, generate
from jacrl.models import registry
from jacrl.models.registry import ModelError, load
from jacrl.results import (
    KINDS,
    RowsError,
    append_cell_rows,
    append_row,
    format_row,
    is_done,
    model_label,
    read_rows,
    rows_by_key,
)
from jacrl.stats import pass_at_k, wilson
from jacrl.tasks.record import family_of, read_tasks

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


def _lone_greedy(lm, tok, prompt: str, budget: int) -> str:
    """A greedy completion decoded the plainest way (one sequence, argmax of the full-precision
    logits step by step, mlx-lm's own KV cache): the expectation for any batched greedy."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    from jacrl.prompts import prompt_ids

    cache, ids, new = make_prompt_cache(lm), prompt_ids(tok, prompt), []
    x = mx.array([ids])
    for _ in range(budget):
        token = mx.argmax(lm(x, cache=cache)[0, -1]).item()
        if token in tok.eos_token_ids:
            break
        new.append(token)
        x = mx.array([[token]])
    return tok.decode(new)


def test_greedy_in_a_mixed_batch_is_a_lone_greedy_decode(tiny, harness_tasks):
    """Several prompts' greedy answers decoded in one continuous batch with their samples (each
    prompt prefilled once, its cache shared by its greedy and samples; a batch smaller than the
    sequences, so finished ones leave and waiting ones enter): every greedy answer is what a lone
    greedy decode of its prompt gives, and so is every copy of n greedy samples sharing a
    prefill. Budgets are per request; the same call gives the same samples."""
    lm, tok = load(tiny)
    prompts = [t["prompt"] for t in harness_tasks[:3]]
    budgets = [12, 5, 9]
    lone = [_lone_greedy(lm, tok, p, b) for p, b in zip(prompts, budgets, strict=True)]
    requests = [Request(p, 1, 0.0, b) for p, b in zip(prompts, budgets, strict=True)]
    requests += [Request(p, 3, 1.0, b) for p, b in zip(prompts, budgets, strict=True)]
    timing = {}
    mixed = decode(lm, tok, requests, seed=3, batch_size=4, timing=timing)
    assert [r[0].text for r in mixed[:3]] == lone
    # every decoded token counted (a finished sequence's end token too), each part timed
    drawn = sum(len(s.ids) for r in mixed for s in r)
    assert timing["tokens"] == drawn and timing["prefill_s"] > 0 and timing["decode_s"] > 0
    for r, req in zip(mixed, requests, strict=True):
        assert len(r) == req.n and all(s.tokens <= req.max_tokens for s in r)
        assert all(s.truncated == (s.tokens == req.max_tokens) for s in r)
    assert decode(lm, tok, requests, seed=3, batch_size=4) == mixed  # seeded
    shared = generate(lm, tok, prompts, n=3, temperature=0.0, max_tokens=budgets, batch_size=8)
    assert [[s.text for s in r] for r in shared] == [[t] * 3 for t in lone]
    with pytest.raises(ValueError, match="2 token budgets for 1 prompts"):
        generate(lm, tok, prompts[:1], n=1, max_tokens=[3, 4])


def test_decode_split_over_worker_processes(tiny, harness_tasks, tmp_path, monkeypatch):
    """`decode_split` over 2 one-BLAS-thread worker processes: every greedy answer is `decode`'s
    in one process, the same call gives the same samples, a prompt's sequences stay in one share
    (prefilled once) and the shares balance the work; an evaluation asking for workers with a
    loaded model, 0 workers, or a worker that fails are one-line errors."""
    lm, tok = load(tiny)
    prompts = [t["prompt"] for t in harness_tasks[:3]]
    requests = [Request(p, 1, 0.0, 10) for p in prompts]
    requests += [Request(p, 2, 1.0, 10) for p in prompts]
    timing = {}
    split = decode_split(tiny, None, requests, workers=2, seed=3, timing=timing)
    assert [r[0].text for r in split[:3]] == [r[0].text for r in decode(lm, tok, requests[:3])]
    assert [len(r) for r in split] == [r.n for r in requests]
    workers = timing["workers"]  # each worker's own: its load, prefill, decode and tokens
    assert len(workers) == 2 and all(w["load_s"] > 0 and w["decode_s"] > 0 for w in workers)
    assert sum(w["tokens"] for w in workers) == sum(len(s.ids) for r in split for s in r)
    assert decode_split(tiny, None, requests, workers=2, seed=3) == split  # seeded
    shares = _shares(requests, 2)
    assert sorted(i for s in shares for i in s) == list(range(6))
    assert all(len({requests[i].prompt for i in s}) == len(s) // 2 for s in shares)
    heavy = [Request("a", 4, 1.0, 100), Request("b", 1, 0.0, 100), Request("c", 1, 0.0, 100)]
    heavy += [Request("d", 1, 0.0, 100), Request("e", 1, 0.0, 100)]
    assert _shares(heavy, 2) == [[0], [1, 2, 3, 4]]  # 400 tokens of work each side
    assert _shares(heavy[:1], 2) == [[0]]  # an empty share starts no worker
    with pytest.raises(ValueError, match="decode workers must be >= 1, not 0"):
        decode_split(tiny, None, requests, workers=0)
    with pytest.raises(ModelError, match="unknown model"):  # before any worker starts
        decode_split(tmp_path / "no-model", None, requests, workers=2)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{}")
    with pytest.raises(RuntimeError, match=r"^decode_split: worker 0 exited 1; worker 1 exited 1"):
        decode_split(tmp_path / "broken", None, requests, workers=2)
    cfg = EvalConfig(n=1, max_tokens=8, decode_workers=2)
    with monkeypatch.context() as m:  # the workers load the weights; the parent, the tokenizer
        m.setattr(registry, "_LOADED", {})  # no cached copy to hide a load
        m.setattr(registry, "_mlx_load", lambda *a: pytest.fail("the parent loaded the weights"))
        rows = [ev.evaluate(tiny, None, harness_tasks[:2], cfg)]
    rows.append(ev.evaluate(tiny, None, harness_tasks[:2], EvalConfig(n=1, max_tokens=8)))
    tok, (_, loaded) = registry.load_tokenizer(tiny), load(tiny)
    assert tok.eos_token_ids == loaded.eos_token_ids and tok.encode("x") == loaded.encode("x")
    greedy = [[(p["greedy_tier"], p["greedy_reward"]) for p in r["per_task"]] for r in rows]
    assert greedy[0] == greedy[1] and rows[0]["decode_workers"] == 2  # an evaluation's, split
    with pytest.raises(ValueError, match="decode_workers > 1 needs the model as a name or dir"):
        ev.evaluate((lm, tok), None, harness_tasks[:1], cfg)
    with pytest.raises(ValueError, match="decode_workers must be >= 1, got 0"):
        EvalConfig(decode_workers=0)


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
    return provenance.code_version(tmp_path)


def test_code_version_ignores_comments_and_docstrings(tmp_path):
    code = {
        "reward.py": '"""Doc."""\nX = 1\n\ndef f(a):\n    """Doc."""\n    return a + X\n',
        "train/__init__.py": "",
        "train/sft.py": "class S:\n    y = 2\n",
        "report/show.py": "print(1)\n",
    }
    before = _package(tmp_path, code)
    assert before == provenance.code_version(tmp_path)
    edited = dict(code)
    edited["reward.py"] = (
        '"""Another doc."""\n# a comment\nX = 1  # one\n\n\n'
        'def f(a):\n    """Other."""\n    # why\n    return a + X\n'
    )
    edited["train/sft.py"] = 'class S:\n    """Now documented."""\n\n    y = 2\n'
    edited["report/show.py"] = "print(2)\n"  # the report decides no result (UNKEYED)
    assert _package(tmp_path, edited) == before


def test_code_version_changes_with_the_code_of_a_listed_module(tmp_path):
    """Any module's code but an UNKEYED one's, a module added too: no list names them."""
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
    names = {
        p.relative_to(provenance.PACKAGE).as_posix()
        for p in provenance.imported_sources(list(code_graph.modules()))
    }
    kept = ("evaluate.py", "token_budget.py", "ruler/reward.py", "train/sft.py", "cli/ladder.py")
    for module in kept:
        assert module in names
    for module in ("report/", "project.py", "config.py", "jsonl.py"):
        assert not [n for n in names if n.startswith(module)], module
    with pytest.raises(ModuleNotFoundError, match="jacrl.no_such_module"):
        provenance.code_of(["jacrl.no_such_module"])


# -- one real evaluation's row; percentages, families, best-of-1 -----------------------------------


@pytest.fixture(scope="module")
def one_task():
    t = read_tasks(ROOT / "data" / "tasks.jsonl")[0]
    return [{"prompt": t["prompt"], "answer": t["answer"]}]


def test_a_sampled_evaluation_row(tiny, one_task, tmp_path, capsys):
    """evaluate with samples: n and temperature as asked, every phase timed (load, greedy,
    sample, grade, total; none negative), the samples file named, the per-task record kept,
    BLAS threads recorded, and progress saying how many completions are graded."""
    cfg = EvalConfig(n=2, temperature=0.7, k=(1, 2), seed=0, max_tokens=12)
    path = tmp_path / "s.jsonl.gz"
    row = ev.evaluate(tiny, None, one_task, cfg, samples=path, progress=True)
    assert (row["n"], row["temperature"], row["tasks"]) == (2, 0.7, 1)
    assert set(row["seconds"]) == {"load", "generate", "grade", "total"}
    assert all(v >= 0 for v in row["seconds"].values())
    assert row["seconds"]["total"] >= row["seconds"]["generate"] + row["seconds"]["grade"]
    assert path.is_file() and row["samples"] and row["samples"].endswith("s.jsonl.gz")
    assert len(row["per_task"]) == 1 and 0 <= row["per_task"][0]["samples_correct"] <= 2
    assert "blas_threads" in row["provenance"]
    err = capsys.readouterr().err
    assert "grading 3 completions" in err and "generate" in err


def test_a_greedy_evaluation_has_temperature_0_and_no_tasks_is_refused(tiny, one_task):
    """evaluate with n=0: the row's temperature is 0.0 whatever the config says (greedy only);
    no tasks: 'no tasks to evaluate'."""
    cfg = EvalConfig(n=0, temperature=0.7, k=(1,), seed=0, max_tokens=8)
    row = ev.evaluate(tiny, None, one_task, cfg)
    assert (row["n"], row["temperature"]) == (0, 0.0)
    with pytest.raises(ValueError, match="^no tasks to evaluate$"):
        ev.evaluate(tiny, None, [], cfg)


def test_percentages_keep_two_decimals_and_none_of_nothing(harness_tasks):
    """grade's percentages: 1 of 3 tasks is 33.33 %, 2 of 3 66.67 % (two decimals); of no
    tasks, 0.0."""
    tasks = harness_tasks[:3]
    one = ev.grade(tasks, [gold(tasks[0]), "junk", "junk"], k=(1,))
    two = ev.grade(tasks, [gold(tasks[0]), gold(tasks[1]), "junk"], k=(1,))
    assert (one["pass1_pct"], two["pass1_pct"]) == (33.33, 66.67)
    assert ev.grade([], [], k=(1,))["pass1_pct"] == 0.0


def test_a_tasks_family_is_its_own_or_its_ids_first_word():
    assert family_of({"meta": {"id": "loop_sum_3", "family": "walkers"}}) == "walkers"
    assert family_of({"meta": {"id": "loop_sum_3", "family": ""}}) == "loop"
    assert family_of({"answer": json.dumps({"id": "graph_bfs"})}) == "graph"


def test_grading_no_tasks_gives_zeros_not_an_error():
    m = ev.grade([], [], k=(1,))
    assert (m["tasks"], m["pass1_pct"], m["avg_osim"], m["avg_idiom"]) == (0, 0.0, 0.0, 0.0)
    assert m["bestofk"] is None and m["pass_at_k"] == {}


def test_one_sample_per_task_is_a_best_of_one(harness_tasks):
    """n = 1: best-of-k is reported with k = 1 (it is only absent without samples)."""
    task = harness_tasks[0]
    body = "```jac\n" + json.loads(task["answer"])["gold"] + "\n```"
    m = ev.grade([task], [body], [[body]], k=(1,))
    assert m["pass_at_k"] == {"1": 100.0}
    assert m["bestofk"] == {
        "k": 1,
        "deploy": 1,
        "deploy_pct": 100.0,
        "coverage": 1,
        "coverage_pct": 100.0,
        "oracle": 1,
        "oracle_pct": 100.0,
    }


# -- the result rows (jacrl.results): a cell's rows, the summary, model labels ---------------------


def _cell(key: str, kind: str, **extra) -> dict:
    return {"cell_key": key, "kind": kind, **extra}


def test_a_cells_rows_are_appended_once_per_key_and_kind(tmp_path):
    """append_cell_rows: rows already in the file (same cell key and kind) are not appended
    again, nor a second row of one (key, kind) in the same call; it returns how many it
    appended, makes missing folders and locks `<results>.lock` beside the file."""
    path = tmp_path / "new" / "rows.jsonl"
    assert append_cell_rows(path, [_cell("k1", "gen", v=1), _cell("k1", "gen", v=2)]) == 1
    assert (tmp_path / "new" / "rows.jsonl.lock").is_file()
    assert (
        append_cell_rows(path, [_cell("k1", "gen", v=3), _cell("k1", "mem"), _cell("k2", "gen")])
        == 2
    )
    rows = [json.loads(ln) for ln in path.read_text().splitlines()]
    assert [(r["cell_key"], r["kind"], r.get("v")) for r in rows] == [
        ("k1", "gen", 1),
        ("k1", "mem", None),
        ("k2", "gen", None),
    ]
    present = rows_by_key(path)
    assert present == {"k1": {"gen", "mem"}, "k2": {"gen"}}
    assert is_done(present, "k1") and not is_done(present, "k2") and not is_done(present, "k3")
    assert set(KINDS) == {"gen", "mem"}


def test_rows_by_key_skips_rows_without_a_key_and_a_torn_last_line(tmp_path):
    """rows_by_key: {cell key: kinds} of the rows that have a key; a torn last line is skipped
    without a warning; no file is {}."""
    path = tmp_path / "rows.jsonl"
    assert rows_by_key(path) == {}
    path.write_text(
        json.dumps(_cell("k", "mem")) + "\n" + json.dumps({"model": "m"}) + "\n" + '{"cell_key": "t'
    )
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert rows_by_key(path) == {"k": {"mem"}}


def test_bytes_that_are_not_utf8_are_replaced_not_fatal(tmp_path):
    """read_rows: a row whose text holds bytes that are not UTF-8 is read, with U+FFFD."""
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"completion": "a\xffb"}\n')
    assert results.read_rows(path) == [{"completion": "a\ufffdb"}]


def _row(**kw) -> dict:
    row = {
        "model": "jac-tiny",
        "adapter": None,
        "tasks": 4,
        "n": 0,
        "k": 0,
        "temperature": 0.0,
        "seed": 0,
        "max_tokens": 64,
        "tag": "",
        "run_pct": 50.0,
        "pass1_pct": 25.0,
        "wilson_lo": 4.6,
        "wilson_hi": 69.9,
        "pass1": 1,
        "near_pct": 25.0,
        "avg_osim": 0.5,
        "truncation_pct": 0.0,
        "pass_at_k": {},
        "by_family": {"a": [1, 2], "b": [0, 3]},
    }
    return row | kw


def test_a_rows_summary_says_base_or_adapter_tag_and_anecdotes():
    """format_row: a row without an adapter is '(base)', with one '+ adapter'; a tag shows only
    when there is one; a family of 2 tasks or fewer is marked an anecdote, of 3 it is not."""
    text = format_row(_row())
    assert text.splitlines()[0] == "model jac-tiny (base)"
    assert "tag=" not in text
    assert text.splitlines()[-1] == "  by family: a: 1/2 (anecdote)  b: 0/3"
    text = format_row(_row(adapter="runs/a1", tag="t1"))
    assert text.splitlines()[0] == "model jac-tiny + runs/a1"
    assert text.splitlines()[1].endswith("  max_tokens=64  tag=t1")


@pytest.mark.parametrize(
    "model, label",
    [("/some/where/My Model v2", "My-Model-v2"), ("models/qwen.0-5b", "qwen.0-5b"), ("", "model")],
)
def test_a_model_path_is_labelled_by_its_directorys_name(model, label):
    """model_label: a path (not a registry name) is labelled by its last part, characters
    outside [A-Za-z0-9_.-] made '-'; nothing left is 'model'."""
    assert model_label(model) == label


def test_appending_after_a_whole_last_line_warns_of_nothing(tmp_path):
    """append_row: a file whose last line ends in a newline is appended to as it is (no torn
    line to drop, no warning)."""
    import warnings

    path = tmp_path / "rows.jsonl"
    results.append_row(path, {"a": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        results.append_row(path, {"a": 2})
    assert path.read_text() == '{"a": 1}\n{"a": 2}\n'


def test_a_torn_line_dropped_for_a_cells_rows_is_reported_at_the_callers_line(tmp_path):
    """append_cell_rows dropping a torn last line: the warning points at the line that asked
    for the rows (this test's), not at append_cell_rows' own call of append_row
    (bench/mutation.py deselects this test: there a trampoline of the tool is the caller)."""
    path = tmp_path / "rows.jsonl"
    path.write_text('{"cell_key": "k1", "kind": "gen"}\n{"cell_key": "k1", "ki')
    with pytest.warns(UserWarning, match="dropped a torn last line 2") as rec:
        here, n = sys._getframe().f_lineno, append_cell_rows(path, [_cell("k1", "mem")])
    assert n == 1 and (rec[0].filename, rec[0].lineno) == (__file__, here)
    assert rows_by_key(path) == {"k1": {"gen", "mem"}}


def test_a_torn_line_dropped_for_a_cells_rows_is_never_reported_in_results(tmp_path):
    """The same warning, whoever calls append_cell_rows: never at a line of results.py."""
    path = tmp_path / "rows.jsonl"
    path.write_text('{"cell_key": "k1", "kind": "gen"}\n{"cell_key": "k1", "ki')
    with pytest.warns(UserWarning, match="dropped a torn last line 2") as rec:
        assert append_cell_rows(path, [_cell("k1", "mem")]) == 1
    assert rec[0].filename != results.__file__


def test_a_rows_summary_names_each_figure_and_best_of_k():
    """format_row: the table's labels (avg osim among them), and best-of-k's line when the
    row has one."""
    b = {"k": 4, "deploy_pct": 50.0, "coverage_pct": 75.0, "oracle_pct": 75.0}
    text = format_row(_row(bestofk=b))
    assert "  avg osim " in text and "  truncated " in text
    assert "best-of-4 deploy" in text and "50.0%  (coverage 75.0%, oracle 75.0%)" in text
