"""The five notebooks, executed headless with papermill at tiny parameters (real jaclang, real
jac-tiny), checked on what they print, write and append — not only that they ran. Each notebook
ends with a `SUMMARY {json}` line that these tests read."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jacrl import ladder, report

ROOT = Path(__file__).resolve().parent.parent
NB = ROOT / "notebooks"
NOTEBOOKS = ["00_corpus_mining", "10_task_building", "20_reward_inspection", "30_training",
             "40_ladder_analysis"]


def execute(name: str, out_dir: Path, **params) -> tuple[dict, dict]:
    """Run notebooks/<name>.ipynb with papermill (as `jacrl ladder run` does); return the executed
    notebook and its SUMMARY."""
    out = out_dir / f"{name}.ipynb"
    cmd = [sys.executable, "-m", "papermill", str(NB / f"{name}.ipynb"), str(out), "--cwd",
           str(ROOT), "--no-progress-bar", "-k", "python3", "-y", json.dumps(params)]
    p = subprocess.run(cmd, check=False, capture_output=True, text=True, env=ladder.kernel_env(), timeout=900)
    assert p.returncode == 0, f"{name} failed:\n{p.stderr[-4000:]}"
    nb = json.loads(out.read_text())
    text = "".join("".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", [])
                   if o.get("output_type") == "stream" and o.get("name") == "stdout")
    lines = [ln for ln in text.splitlines() if ln.startswith("SUMMARY ")]
    assert lines, f"{name}: no SUMMARY line"
    return nb, json.loads(lines[-1][len("SUMMARY "):])


def images(nb: dict) -> int:
    return sum("image/png" in o.get("data", {}) for c in nb["cells"] for o in c.get("outputs", []))


@pytest.fixture(scope="module")
def data_dir():
    d = ROOT / "data"
    if not (d / "splits" / "holdout.jsonl").is_file():
        pytest.skip("data/splits not built")
    return str(d)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return tmp_path_factory.mktemp("notebooks")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_committed_notebooks_are_stripped_and_parameterized(name):
    nb = json.loads((NB / f"{name}.ipynb").read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code)
    tagged = [c for c in code if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1
    for line in "".join(tagged[0]["source"]).splitlines():  # papermill: one '=' per line
        assert line.count("=") == 1, line


def test_00_corpus_mining(work):
    tree, drafts = work / "tree", work / "drafts"
    tree.mkdir()
    for stem in ("syn_harness_collatz_steps", "lib_harness_clamp_partial",
                 "osp_harness_tally_walker"):
        shutil.copy(ROOT / "drivers" / f"{stem}.jac", tree)
    nb, s = execute("00_corpus_mining", work, tree=str(tree), max_files=3, drafts_dir=str(drafts))
    assert s["files"] == 3 and s["units"] >= 5 and s["kinds"].get("def", 0) >= 2
    assert s["candidates"] >= 3 and s["drafts_written"] == s["candidates"]
    written = sorted(drafts.glob("*.jac"))
    assert len(written) == s["candidates"]
    assert all(">>>HOLE" in p.read_text() and "<<<HOLE" in p.read_text() for p in written)
    assert any("collatz_steps" in p.name for p in written)
    assert images(nb) >= 1


def test_10_task_building(work):
    data = work / "data10"
    nb, s = execute("10_task_building", work, drivers_glob="*_bank_*.jac,*_crm_*.jac",
                    data_dir=str(data), holdout_min=1, valid_n=2)
    assert s["tasks"] == 14 and set(s["families"]) == {"arch", "err", "lib", "osp", "syn", "text"}
    assert s["problems"] == []
    assert len(s["holdout_sources"]) == 1 and s["holdout"] >= 6  # one app covers every family
    assert s["valid"] == 2 and s["holdout"] + s["trainpool"] + s["valid"] <= 14
    from jacrl import splits

    assert len(splits.load_split("holdout", data)) == s["holdout"]  # written, since missing
    assert len(splits.load_split("trainpool", data)) == s["trainpool"]
    assert len(list((data / "templates").glob("*.jac"))) == 14
    assert images(nb) >= 1


def test_20_reward_inspection(work, tiny, data_dir):
    from jacrl import splits

    ids = [json.loads(t["answer"])["id"] for t in splits.load_split("holdout", data_dir)]
    task = "arch_blog_post_status" if "arch_blog_post_status" in ids else ids[0]
    nb, s = execute("20_reward_inspection", work, data_dir=data_dir, task_id=task, model=tiny,
                    n_samples=4, max_tokens=32)
    sc, tiers = s["scores"], s["tiers"]
    assert s["task"] == task
    assert sc["gold (fenced)"] == 1.0 and sc["gold (bare)"] == 1.0 and sc["echoed file"] == 1.0
    assert tiers["gold (fenced)"] == "exact" and tiers["empty"] == "empty" and sc["empty"] == 0.0
    assert sc["garbage"] < 0.4 and sc["another task's body"] < 1.0 and sc["truncated echo"] < 1.0
    if task == "arch_blog_post_status":  # its mutated body runs with a wrong output
        assert tiers["mutated body"] == "runs" and 0.4 <= sc["mutated body"] <= 0.8
    assert s["samples"] == 4 and sum(s["sample_tiers"].values()) == 4
    assert 0.0 <= s["sample_mean"] <= 1.0
    assert images(nb) >= 1


@pytest.fixture(scope="module")
def trained(work, tiny, data_dir):
    """Notebook 30 on one sft cell with a tiny budget; its results file."""
    results = work / "results" / "rl_ladder.jsonl"
    nb, s = execute("30_training", work, rung="1", model=tiny, condition="sft", sft_iters=3,
                    sft_set=json.dumps({"learning_rate": 1e-3, "warmup": 0, "lora_layers": 2,
                                        "lora_rank": 4, "grad_checkpoint": False,
                                        "batch_size": 1, "steps_per_report": 1,
                                        "steps_per_eval": 1000, "val_batches": 1}),
                    gen_limit=2, n=2, k="1,2", max_tokens=16, data_dir=data_dir,
                    results=str(results), artifacts=str(work / "artifacts"))
    return nb, s, results


def test_30_training(trained):
    nb, s, results = trained
    assert s["cell"].endswith("/sft") and s["appended"] == 2 and set(s["artifacts"]) == {"sft"}
    art = Path(s["artifacts"]["sft"])
    assert (art / "COMPLETE").is_file() and (art / "metrics.jsonl").is_file()
    rows = report.load_rows(results)
    assert [(r["cell_key"], r["kind"]) for r in rows] == [(s["key"], "gen"), (s["key"], "mem")]
    gen, mem = rows
    assert gen["tasks"] == 2 and gen["n"] == 2 and set(gen["pass_at_k"]) == {"1", "2"}
    assert mem["tasks"] == 1 and mem["n"] == 0 and mem["tag"].endswith("/sft/mem")
    assert gen["artifact"] == json.loads((art / "manifest.json").read_text())["key"]
    assert gen["ladder"]["sft"]["iters"] == 3 and len(gen["per_task"]) == 2
    assert gen["reward_formula"] is None  # no GRPO stage: trained without the reward
    assert images(nb) >= 1  # the training curves


def test_40_ladder_analysis(work, trained):
    _, _, results = trained
    rows = report.load_rows(results)
    base = []
    for r in rows:  # a base cell beside the trained one, so McNemar has pairs
        b = json.loads(json.dumps(r))
        b.update(condition="base", cell_key="base-" + r["cell_key"], pass1=r["tasks"],
                 tag=r["tag"].replace("/sft/", "/base/"), pass1_pct=100.0)
        for t in b["per_task"]:
            t["greedy_exact"] = True
        base.append(b)
    ladder.append_cell_rows(results, base)
    figs = work / "figures"
    nb, s = execute("40_ladder_analysis", work, results=str(results), figures_dir=str(figs))
    assert s["rows"] == 4 and s["evaluations"] == 4 and s["mcnemar"] == 2
    assert (figs / "ladder.png").stat().st_size > 1000 and (figs / "ladder_passk.png").is_file()
    assert images(nb) >= 1
