"""The five notebooks, executed the way JupyterLab runs them: on the kernel their metadata names
(the `jacrl` kernel `make setup` installs), started in the project's notebooks/ folder, with their
default parameters. They run in a throwaway project (its own jacrl.toml, copies of data/ and
notebooks/, a few drivers, models/ linked read-only), so project discovery finds it from
notebooks/ and the real checkout's data/, results/ and figures/ are never written (checked).
Defaults that take long on a CPU are scaled down only through JACRL_NOTEBOOK_QUICK=1
(jacrl.notebooks.QUICK). Each notebook ends with `SUMMARY {json}`, which these tests read.

Also here: JupyterLab itself serving the notebooks, the `jacrl` kernelspec and OpenBLAS in its
kernels, and the ladder running its cells on that kernel."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import papermill
import pytest
from jupyter_client.kernelspec import KernelSpecManager

from jacrl import blas, kernel, ladder, notebooks, recipe, report
from jacrl.results import append_cell_rows
from jacrl.ruler import variants
from jacrl.tasks import splits

ROOT = Path(__file__).resolve().parent.parent
NB = ROOT / "notebooks"
NOTEBOOKS = [
    "00_corpus_mining",
    "10_task_building",
    "20_reward_inspection",
    "30_training",
    "40_ladder_analysis",
]
PATH_PARAMS = {
    "tree",
    "drafts_dir",
    "drivers_dir",
    "data_dir",
    "results",
    "artifacts",
    "figures_dir",
}
SUBSET = ("*_bank_*.jac", "*_crm_*.jac")  # 14 drivers: one app covers every family
MINE = ("syn_harness_collatz_steps", "lib_harness_clamp_partial", "osp_harness_tally_walker")


def execute(root: Path, name: str, **params) -> tuple[dict, dict]:
    """Run <root>/notebooks/<name>.ipynb as JupyterLab does (the kernel from its metadata, started
    in the notebooks folder), with `params` injected only where given; return the executed
    notebook and its SUMMARY."""
    nb_dir = root / "notebooks"
    out = root / "executed" / f"{name}.ipynb"
    out.parent.mkdir(exist_ok=True)
    papermill.execute_notebook(
        str(nb_dir / f"{name}.ipynb"),
        str(out),
        parameters=params,
        cwd=str(nb_dir),
        progress_bar=False,
    )
    nb = json.loads(out.read_text())
    assert nb["metadata"]["kernelspec"]["name"] == kernel.NAME
    text = "".join(
        "".join(o.get("text", ""))
        for c in nb["cells"]
        for o in c.get("outputs", [])
        if o.get("output_type") == "stream" and o.get("name") == "stdout"
    )
    lines = [ln for ln in text.splitlines() if ln.startswith("SUMMARY ")]
    assert lines, f"{name}: no SUMMARY line"
    return nb, json.loads(lines[-1][len("SUMMARY ") :])


def images(nb: dict) -> int:
    return sum("image/png" in o.get("data", {}) for c in nb["cells"] for o in c.get("outputs", []))


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime) of every file under the checkout's data/, results/ and figures/, but the
    git-ignored ones other tools write (results/cells/, results/eval/, locks)."""
    ignored = ("results/cells/", "results/eval/")
    files = (p for d in ("data", "results", "figures") for p in (root / d).rglob("*"))
    return {
        rel: (p.stat().st_size, p.stat().st_mtime_ns)
        for p in files
        if p.is_file()
        and not (rel := p.relative_to(root).as_posix()).startswith(ignored)
        and not rel.endswith(".lock")
    }


@pytest.fixture(scope="module")
def jacrl_kernel():
    """What `make setup` does: install the `jacrl` kernelspec for this interpreter."""
    return kernel.install()


@pytest.fixture(scope="module")
def checkout():
    """The real checkout's data/results/figures before any notebook ran."""
    return snapshot(ROOT)


@pytest.fixture(scope="module")
def project(tmp_path_factory, jacrl_kernel, checkout):
    """A throwaway project; the notebooks run from its notebooks/ with JACRL_ROOT unset and quick
    mode on."""
    root = tmp_path_factory.mktemp("project")
    shutil.copy(ROOT / "jacrl.toml", root)
    shutil.copytree(ROOT / "data", root / "data")
    shutil.copytree(NB, root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    (root / "drivers").mkdir()
    for pat in SUBSET:
        for p in ROOT.glob(f"drivers/{pat}"):
            shutil.copy(p, root / "drivers")
    (root / "mine").mkdir()  # a small tree for notebook 00
    for stem in MINE:
        shutil.copy(ROOT / "drivers" / f"{stem}.jac", root / "mine")
    (root / "models").symlink_to(ROOT / "models")  # read only: nothing writes models/
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("JACRL_ROOT", raising=False)
        mp.setenv(notebooks.QUICK_ENV, "1")
        yield root


# -------------------------------------------------------------------------------------------
# the committed notebooks
# -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_committed_notebooks_are_stripped_parameterized_and_thin(name):
    nb = json.loads((NB / f"{name}.ipynb").read_text())
    assert nb["metadata"]["kernelspec"]["name"] == kernel.NAME
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in code)
    tagged = [c for c in code if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1
    assigned = [
        ln
        for ln in "".join(tagged[0]["source"]).splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    assert all(ln.count("=") == 1 for ln in assigned), assigned  # papermill: one '=' a line
    params = papermill.inspect_notebook(str(NB / f"{name}.ipynb"))
    assert len(params) == len(assigned)  # papermill parses every one
    # every path defaults to "the project's", never to a path relative to the kernel's cwd
    paths = {v: p["default"] for v, p in params.items() if v in PATH_PARAMS}
    assert paths and all(x == '""' for x in paths.values()), paths
    # no logic in the notebook: every other code cell is short
    assert all(len("".join(c["source"]).splitlines()) <= 15 for c in code if c not in tagged)


# -------------------------------------------------------------------------------------------
# each notebook, from notebooks/, default parameters
# -------------------------------------------------------------------------------------------


def test_00_corpus_mining_defaults(project):
    nb, s = execute(project, "00_corpus_mining")
    assert s["project"] == str(project)
    assert s["files"] > 100 and s["units"] > 1000 and s["kinds"].get("def", 0) > 100
    assert s["max_files"] == notebooks.QUICK["00_corpus_mining"]["max_files"]  # quick mode
    assert s["drafts_written"] == 0
    assert images(nb) >= 1


def test_00_mines_a_tree_given_relative_to_notebooks(project):
    nb, s = execute(
        project, "00_corpus_mining", tree="../mine", max_files=3, drafts_dir="../drafts"
    )
    assert s["files"] == 3 and s["units"] >= 5 and s["kinds"].get("def", 0) >= 2
    assert s["candidates"] >= 3 and s["drafts_written"] == s["candidates"]
    written = sorted((project / "drafts").glob("*.jac"))
    assert len(written) == s["candidates"] and not (project / "notebooks" / "drafts").exists()
    assert all(">>>HOLE" in p.read_text() and "<<<HOLE" in p.read_text() for p in written)
    assert any("collatz_steps" in p.name for p in written)


def test_10_task_building_defaults(project):
    nb, s = execute(project, "10_task_building")
    data = project / "data"
    assert s["project"] == str(project) and s["tasks_file"] == str(data / "tasks.jsonl")
    assert s["tasks"] == len((ROOT / "data" / "tasks.jsonl").read_text().splitlines())
    assert s["problems"] == [] and s["splits_written"] is None  # they exist: kept
    for name in splits.SPLITS:  # the split it computes is the one on disk
        assert s[name] == len(splits.load_split(name, data))
    assert not (project / "notebooks" / "data").exists()
    assert images(nb) >= 1
    conv = (ROOT / "data" / "conversion.jsonl").read_text().splitlines()
    assert s["conversion_tasks"] == len(conv) > 0 and s["conversion_same_answers"] is True
    assert s["format_comparisons"] == 0  # no ladder rows in the throwaway project


def test_10_shows_the_format_comparison_from_rows(project):
    """With paired hole-fill and conversion rows in the results dir given, notebook 10 shows the
    comparison and its figure."""
    rows = []
    for fmt, passed in (("hole", [1, 0, 0]), ("conversion", [1, 1, 0])):
        for cond in ("base", "sft"):
            rows.append(
                {
                    "tag": f"r1/m/{cond}/gen",
                    "cell_key": f"{cond}-{fmt}",
                    "model_name": "m",
                    "rung": "1",
                    "condition": cond,
                    "kind": "gen",
                    "format": fmt,
                    "paired": True,
                    "tasks": 3,
                    "pass1": sum(passed),
                    "per_task": [
                        {"id": f"t{i}", "greedy_exact": bool(x)} for i, x in enumerate(passed)
                    ],
                }
            )
    append_cell_rows(project / "results10" / ladder.RESULTS_FILE, rows)
    nb, s = execute(project, "10_task_building", results="../results10")
    assert s["format_comparisons"] == 2 and images(nb) >= 2
    text = "".join(
        str(o.get("data", {}).get("text/plain", ""))
        for c in nb["cells"]
        for o in c.get("outputs", [])
    )
    assert "33.3 [6-79]" in text and "66.7 [21-94]" in text  # hole-fill, conversion (Wilson)
    assert not (project / "notebooks" / "results10").exists()


def test_10_builds_a_driver_subset_from_the_project_drivers(project):
    nb, s = execute(
        project,
        "10_task_building",
        drivers_glob=",".join(SUBSET),
        data_dir="../data10",
        holdout_min=1,
        valid_n=2,
    )
    data = project / "data10"
    assert s["tasks_file"] == str(data / "tasks.jsonl")
    assert s["tasks"] == 14 and set(s["families"]) == {"arch", "err", "lib", "osp", "syn", "text"}
    assert s["problems"] == [] and s["splits_written"] == str(data / "splits")  # were missing
    assert len(s["holdout_sources"]) == 1 and s["holdout"] >= 6  # one app covers every family
    assert s["valid"] == 2 and s["holdout"] + s["trainpool"] + s["valid"] <= 14
    assert len(splits.load_split("holdout", data)) == s["holdout"]
    assert len(splits.load_split("trainpool", data)) == s["trainpool"]
    assert len(list((data / "templates").glob("*.jac"))) == 14


def test_20_reward_inspection_defaults(project):
    nb, s = execute(project, "20_reward_inspection")
    first = json.loads(splits.load_split("holdout", project / "data")[0]["answer"])
    sc, tiers = s["scores"], s["tiers"]
    assert s["project"] == str(project) and s["task"] == first["id"]
    assert sc["gold (fenced)"] == 1.0 and sc["gold (bare)"] == 1.0 and sc["echoed file"] == 1.0
    assert tiers["gold (fenced)"] == "exact" and tiers["empty"] == "empty" and sc["empty"] == 0.0
    assert sc["garbage"] < 0.4 and sc["another task's body"] < 1.0 and sc["truncated echo"] < 1.0
    mutants = [label for label, _ in variants.mutants(first["gold"])]
    assert mutants and all(m in sc for m in mutants)
    assert min(sc[m] for m in mutants) < 1.0  # the gold's mutants are mostly wrong
    assert s["samples"] == 8 and sum(s["sample_tiers"].values()) == 8  # the default n_samples
    assert 0.0 <= s["sample_mean"] <= 1.0
    assert images(nb) >= 1


@pytest.fixture(scope="module")
def trained(project):
    """Notebook 30 at its defaults (quick mode); its SUMMARY."""
    return execute(project, "30_training")


def test_30_training_defaults(project, trained):
    nb, s = trained
    results = project / "results" / "scratch" / "rl_ladder.jsonl"  # by hand: never the ladder's
    assert s["project"] == str(project) and s["results"] == str(results)
    assert not (project / "results" / "rl_ladder.jsonl").exists()
    assert s["cell"].endswith("/sft") and s["appended"] == 2 and set(s["artifacts"]) == {"sft"}
    q = notebooks.QUICK["30_training"]
    assert s["iters"] == {"sft": q["sft_iters"]}
    assert s["eval"]["gen_limit"] == q["gen_limit"] and s["eval"]["n"] == q["n"]
    assert s["eval"]["k"] == [1, 2] and s["eval"]["max_tokens"] == q["max_tokens"]
    art = Path(s["artifacts"]["sft"])
    assert art.parent == project / "artifacts" and (art / "COMPLETE").is_file()
    rows = report.load_rows(results)
    assert [(r["cell_key"], r["kind"]) for r in rows] == [(s["key"], "gen"), (s["key"], "mem")]
    gen, mem = rows
    assert gen["tasks"] == 2 and gen["n"] == 2 and set(gen["pass_at_k"]) == {"1", "2"}
    assert mem["tasks"] == 1 and mem["tag"].endswith("/sft/mem")
    # mem also sampled, at the temperature GRPO would calibrate on this adapter
    assert mem["n"] == q["n"] and 0 < mem["temperature"] <= 1.0
    assert gen["artifact"] == json.loads((art / "manifest.json").read_text())["key"]
    assert gen["reward_formula"] is None  # no GRPO stage: trained without the reward
    assert s["grpo_steps"] == 0 and "no GRPO stage" in "".join(  # its GRPO views say so
        "".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", [])
    )
    assert images(nb) >= 1  # the training curves


def test_40_ladder_analysis_defaults(project, trained):
    results = project / "results" / "rl_ladder.jsonl"
    trained_rows = report.load_rows(project / "results" / "scratch" / "rl_ladder.jsonl")
    append_cell_rows(results, trained_rows)  # notebook 30's rows (by hand: in scratch)
    base = []
    for r in trained_rows:  # a base cell beside the trained one: McNemar has pairs
        b = json.loads(json.dumps(r))
        b.update(
            condition="base",
            cell_key="base-" + r["cell_key"],
            pass1=r["tasks"],
            tag=r["tag"].replace("/sft/", "/base/"),
            pass1_pct=100.0,
        )
        for t in b["per_task"]:
            t["greedy_exact"] = True
        base.append(b)
    append_cell_rows(results, base)
    rows = report.load_rows(results)  # a recipe's decision record on these rows, shown beside
    cfg = ladder.LadderConfig(rungs=(rows[0]["rung"],), models=(rows[0]["model_name"],))
    rec = recipe.build_record(cfg, rows, recipe.RecipeConfig(gate_threshold=0))
    recipe.write_record(project / "results", rec)
    nb, s = execute(project, "40_ladder_analysis")
    assert s["recipe_records"] == [rec["plan_key"]]
    assert f"recipe smart (plan {rec['plan_key']}" in "".join(
        "".join(o.get("text", "")) for c in nb["cells"] for o in c.get("outputs", [])
    )
    figs = project / "results" / "figures"  # beside the rows, never the tracked figures/
    assert s["project"] == str(project) and s["results"] == str(results)
    assert s["rows"] == 4 and s["evaluations"] == 4 and s["mcnemar"] == 2
    assert s["figures"] == [
        str(figs / n)
        for n in (
            "ladder.png",
            "ladder_passk.png",
            "ladder_compile.png",  # the graded measures: the rows record them
            "ladder_run.png",
            "ladder_reward.png",
            "ladder_families.png",
        )
    ]
    assert (figs / "ladder.png").stat().st_size > 1000 and (figs / "ladder_passk.png").is_file()
    assert s["stale_figures"] == {}  # each records the rows file it was drawn from
    source = report.read_stamp(figs / "ladder.png")["sources"][0]
    assert source["path"] == "../rl_ladder.jsonl" and source["rows"] == 4
    assert not (project / "notebooks" / "figures").exists() and not (project / "figures").exists()
    assert images(nb) >= 1


def test_the_real_checkout_is_untouched(project, checkout):
    assert snapshot(ROOT) == checkout


# -------------------------------------------------------------------------------------------
# what the notebooks call (jacrl.notebooks, ladder.notebook_cell)
# -------------------------------------------------------------------------------------------


def test_analysis_refuses_an_empty_results_file(tmp_path):
    (tmp_path / "rows.jsonl").write_text("")
    for path in (tmp_path / "rows.jsonl", tmp_path / "missing.jsonl"):
        with pytest.raises(FileNotFoundError, match="no ladder rows"):
            notebooks.ladder_rows(str(path))


def test_a_subset_that_matches_no_driver_is_an_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no drivers match"):
        notebooks.select_drivers(ROOT / "drivers", "*_nosuchapp_*.jac", tmp_path)
    got = notebooks.select_drivers(ROOT / "drivers", ",".join(SUBSET), tmp_path)
    assert len(got) == 14 and {p.parent for p in got} == {tmp_path}


def test_pick_task_names_a_missing_id():
    with pytest.raises(KeyError, match="no task 'nope' in the holdout split"):
        notebooks.pick_task("holdout", "nope", str(ROOT / "data"))


def test_quick_mode_caps_only_when_set():
    params = {"max_files": 40, "timeout": 10.0}
    assert notebooks.scaled("00_corpus_mining", params, env={}) == params
    logged = []
    got = notebooks.scaled(
        "00_corpus_mining", params, env={notebooks.QUICK_ENV: "1"}, log=logged.append
    )
    assert got == {"max_files": 6, "timeout": 5.0} and "max_files 40 -> 6" in logged[0]
    small = notebooks.scaled(
        "00_corpus_mining",
        {"max_files": 3, "timeout": 1.0},
        env={notebooks.QUICK_ENV: "1"},
        log=logged.append,
    )
    assert small == {"max_files": 3, "timeout": 1.0}  # below the caps: as given


def test_notebook_cell_reports_a_key_mismatch_and_keeps_the_planned_key():
    data = str(ROOT / "data")
    quick = {notebooks.QUICK_ENV: "1"}
    args = dict(
        rung="1",
        model="jac-tiny",
        condition="sft",
        sft_iters=200,
        gen_limit=0,
        n=8,
        k="1,2,4,8",
        max_tokens=512,
        data_dir=data,
    )
    logged = []
    by_hand = ladder.notebook_cell(env=quick, log=logged.append, **args)
    assert (
        by_hand.stages["sft"].iters == 3 and by_hand.eval["n"] == 2 and by_hand.eval["k"] == [1, 2]
    )
    assert by_hand.stages["sft"].lora_layers == 2 and "JACRL_NOTEBOOK_QUICK=1" in logged[0]
    planned = ladder.notebook_cell(env={}, log=logged.append, **args)
    logged.clear()
    cell = ladder.notebook_cell(cell_key=planned.key, env=quick, log=logged.append, **args)
    assert cell == planned and logged == []  # a ladder cell is never scaled
    cell = ladder.notebook_cell(cell_key="r1-planned", env={}, log=logged.append, **args)
    assert cell.key == "r1-planned" and len(logged) == 1
    assert logged[0].startswith(f"warning: planned as r1-planned, computed {planned.key}")


# -------------------------------------------------------------------------------------------
# the jacrl kernel, JupyterLab
# -------------------------------------------------------------------------------------------


def test_setup_installs_the_jacrl_kernelspec(jacrl_kernel, tmp_path):
    fresh = kernel.install(tmp_path)  # into an empty prefix: really written
    assert fresh == tmp_path / "share" / "jupyter" / "kernels" / kernel.NAME
    written = json.loads((fresh / "kernel.json").read_text())
    assert written["argv"][0] == sys.executable and written.get("env", {}) == blas.preload_env()
    spec = KernelSpecManager().get_kernel_spec(kernel.NAME)  # setup's, in this environment
    assert Path(spec.resource_dir) == jacrl_kernel
    assert jacrl_kernel.is_relative_to(Path(sys.prefix))  # the venv's, like --sys-prefix
    assert spec.argv[0] == sys.executable and spec.display_name == kernel.DISPLAY_NAME
    assert spec.env == blas.preload_env()  # no thread count: the starter's is kept
    assert kernel.for_cells() == kernel.NAME


def test_the_ladder_runs_cells_on_the_jacrl_kernel(jacrl_kernel, tmp_path, monkeypatch):
    cfg = ladder.LadderConfig(
        rungs=("1",),
        conditions=("base",),
        data_dir=str(ROOT / "data"),
        results_dir=str(tmp_path / "results"),
    )
    cell = ladder.plan(cfg)[0]
    cmd = ladder.command(cfg, cell)
    assert cmd[cmd.index("-k") + 1] == kernel.NAME
    # a `jacrl` spec of another interpreter shadows ours (JUPYTER_PATH comes first): python3
    other = tmp_path / "jupyter" / "kernels" / kernel.NAME
    other.mkdir(parents=True)
    (other / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [
                    "/elsewhere/bin/python",
                    "-m",
                    "ipykernel_launcher",
                    "-f",
                    "{connection_file}",
                ],
                "display_name": "elsewhere",
                "language": "python",
            }
        )
    )
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    cmd = ladder.command(cfg, cell)
    assert cmd[cmd.index("-k") + 1] == "python3"


def _kernel_maps(name: str, env: dict, cwd: Path) -> str:
    """/proc/self/maps of a fresh kernel `name`, started with `env` (the spec's env on top), then
    a line `threads <OpenBLAS's thread count>` (0 without OpenBLAS)."""
    from jupyter_client.manager import KernelManager

    km = KernelManager(kernel_name=name)
    km.start_kernel(env=env, cwd=str(cwd))
    out: list[str] = []
    try:
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        kc.execute_interactive(
            "from jacrl.blas import blas_record\n"
            "print(open('/proc/self/maps').read())\n"
            "b = blas_record()\n"
            "print('threads', b['threads'] if 'openblas' in b['library'] "
            "else 0)",
            timeout=60,
            output_hook=lambda m: out.append(m["content"].get("text", "")),
        )
        kc.stop_channels()
    finally:
        km.shutdown_kernel(now=True)
    return "".join(out)


@pytest.mark.skipif(blas.find_openblas() is None, reason="Linux with OpenBLAS installed only")
def test_a_jacrl_kernel_has_openblas_loaded(jacrl_kernel, tmp_path):
    """The spec brings OpenBLAS; the thread count is the starter's (the ladder's, the lab's)."""
    lib = blas.preload_env()["LD_PRELOAD"]
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "OPENBLAS_NUM_THREADS")}
    threads = 1 if blas.cpus() > 1 else 2  # not what OpenBLAS would pick by itself
    maps = _kernel_maps(kernel.NAME, {**env, "OPENBLAS_NUM_THREADS": str(threads)}, tmp_path)
    assert "/proc/self/maps" not in maps and lib in maps  # really the kernel's own maps
    assert maps.rstrip().endswith(f"threads {threads}"), maps[-200:]
    assert lib not in _kernel_maps("python3", env, tmp_path)  # control: the spec brings it


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def test_jupyterlab_serves_the_notebooks_and_the_kernel(jacrl_kernel, tmp_path):
    port, token = _free_port(), "jacrl-test-token"
    cmd = [
        str(Path(sys.executable).parent / "jupyter"),
        "lab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={ROOT}",
    ] + (["--allow-root"] if os.getuid() == 0 else [])
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "workspaces"),
    }
    base = f"http://127.0.0.1:{port}"
    with open(tmp_path / "lab.log", "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            deadline, status = time.time() + 60, None
            while time.time() < deadline and proc.poll() is None and status is None:
                try:
                    status = _get(f"{base}/api/status?token={token}")
                except OSError:
                    time.sleep(0.3)
            assert status is not None, (tmp_path / "lab.log").read_text()[-3000:]
            listing = _get(f"{base}/api/contents/notebooks?token={token}")
            names = {c["name"] for c in listing["content"]}
            assert {f"{n}.ipynb" for n in NOTEBOOKS} <= names
            specs = _get(f"{base}/api/kernelspecs?token={token}")["kernelspecs"]
            assert specs[kernel.NAME]["spec"]["display_name"] == kernel.DISPLAY_NAME
            with pytest.raises(urllib.error.HTTPError, match="403"):  # the token is required
                _get(f"{base}/api/contents/notebooks")
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
