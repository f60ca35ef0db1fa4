"""Experiment tracking (`report_to`, `jacrl train ... --report-to wandb`): real jac-tiny trainings
(SFT 3 iterations, GRPO 2) tracked by W&B in offline mode, read back with W&B's own reader of the
offline run (`wandb leet inspect --json`): the run gets what metrics.jsonl gets, its config is the
stage's hyperparameters + the artifact key, and tracking changes no key. A missing package or an
unknown service is a one-line error before any work."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from jacrl import train as tr
from jacrl.cli import main
from jacrl.config import GRPOConfig, SFTConfig, configure
from jacrl.tasks.record import prompt_answer, read_tasks

ROOT = Path(__file__).resolve().parent.parent
SFT_SETS = {
    "iters": "3",
    "learning_rate": "1e-3",
    "warmup": "0",
    "batch_size": "1",
    "lora_layers": "2",
    "lora_rank": "4",
    "grad_checkpoint": "false",
    "steps_per_report": "1",
    "steps_per_eval": "2",
    "val_batches": "1",
}
GRPO = GRPOConfig(
    iters=2,
    learning_rate=1e-3,
    beta=0.04,
    group_size=2,
    batch_size=1,
    max_completion_length=16,
    lora_layers=2,
    grad_checkpoint=False,
    steps_per_report=1,
    temperature=1.0,
    min_group_span=0.0,
)


@pytest.fixture(scope="module")
def wandb_dir(tmp_path_factory):
    """W&B offline, writing under one temp dir for the module (W&B reads its settings from the
    environment once per process); no tracking or project from the environment."""
    d = tmp_path_factory.mktemp("wandb")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("WANDB_MODE", "offline")
        mp.setenv("WANDB_DIR", str(d))
        mp.setenv("WANDB_SILENT", "true")
        for name in ("JACRL_REPORT_TO", "WANDB_PROJECT", "WANDB_RUN_ID", "WANDB_NAME"):
            mp.delenv(name, raising=False)
        yield d


@pytest.fixture(scope="module")
def task_file(tmp_path_factory):
    """The committed train pool's smallest task, as a tasks.jsonl of its own."""
    lines = (ROOT / "data" / "splits" / "trainpool.jsonl").read_text().splitlines()
    line = min((x for x in lines if x.strip()), key=len)
    path = tmp_path_factory.mktemp("tasks") / "one.jsonl"
    path.write_text(line + "\n")
    return path


def offline_runs(wandb_dir: Path, name: str | None = None) -> list[dict]:
    """The offline runs under wandb_dir (those named `name`), read from their transaction logs
    by W&B's own reader: name, project, config, history (rows in order), summary, exit_code."""
    runs = []
    for run in sorted((wandb_dir / "wandb").glob("offline-run-*")):
        out = subprocess.run(
            [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(run)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
        records = [json.loads(x) for x in out.splitlines() if x.strip()]
        head = next(r["run"] for r in records if r["type"] == "run")
        summary: dict = {}
        for r in records:
            if r["type"] == "summary":
                summary.update(r["summary"]["update"])
        view = {
            "name": head["display_name"],
            "project": head["project"],
            "config": head["config"]["update"],
            "summary": summary,
            "history": [r["history"]["item"] for r in records if r["type"] == "history"],
            "exit_code": next(
                (r["exit"].get("exit_code", 0) for r in records if r["type"] == "exit"), None
            ),
        }
        if name is None or view["name"] == name:
            runs.append(view)
    return runs


def metrics(art, event: str) -> list[dict]:
    rows = [json.loads(x) for x in (art.path / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r["event"] == event]


def logged(run: dict, key: str) -> dict[int, float]:
    """{step: value} of one metric in a run's history."""
    return {h["_step"]: h[key] for h in run["history"] if key in h}


def no_tracker_files(art) -> bool:
    return not any("wandb" in p.name or "swanlog" in p.name for p in art.path.rglob("*"))


def test_sft_cli_reports_to_wandb_offline_and_keeps_the_key(
    tiny, task_file, wandb_dir, tmp_path, capsys
):
    arts = tmp_path / "artifacts"
    argv = ["train", "sft", "--model", tiny, "--tasks", str(task_file), "--out-root", str(arts)]
    for k, v in SFT_SETS.items():
        argv += ["--set", f"{k}={v}"]
    assert main(argv + ["--report-to", "wandb", "--wandb-project", "jacrl-test"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    art = tr.Artifact.load(out["path"])
    assert not out["reused"] and art.key == out["key"]

    assert art.path.name == f"sft-{art.key[:16]}"
    (run,) = offline_runs(wandb_dir, art.path.name)
    assert run["project"] == "jacrl-test" and run["exit_code"] == 0
    cfg = configure(SFTConfig(), SFT_SETS)
    hyper = json.loads(json.dumps(dataclasses.asdict(cfg)))
    assert {k: run["config"][k] for k in hyper} == hyper == art.manifest["hyperparameters"]
    assert run["config"]["artifact_key"] == art.key and run["config"]["condition"] == "sft"

    train_rows, val_rows = metrics(art, "train"), metrics(art, "val")
    assert len(train_rows) == 3 and val_rows
    losses = logged(run, "train_loss")
    assert losses == pytest.approx({r["iteration"]: r["train_loss"] for r in train_rows})
    assert logged(run, "val_loss") == pytest.approx(
        {r["iteration"]: r["val_loss"] for r in val_rows}
    )
    for key in ("learning_rate", "tokens_per_second", "trained_tokens"):
        assert sorted(logged(run, key)) == [1, 2, 3], key
    assert run["summary"]["train_loss"] == pytest.approx(train_rows[-1]["train_loss"])
    assert no_tracker_files(art)  # W&B writes under WANDB_DIR, never into the artifact

    # tracking is no knob: the same build without it is the same key (reused, no new run), and
    # an explicit "" wins over JACRL_REPORT_TO
    assert "report_to" not in json.dumps(art.manifest["key_parts"])
    tasks = [prompt_answer(t) for t in read_tasks(task_file)]
    again = tr.sft(tiny, tasks, None, cfg, arts, report_to="", log=lambda m: None)
    assert again.reused and again.key == art.key
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["key"] == art.key
    assert len(offline_runs(wandb_dir, art.path.name)) == 1


def test_grpo_reports_step_metrics_from_the_env_default(
    tiny, task_file, wandb_dir, tmp_path, monkeypatch
):
    monkeypatch.setenv("JACRL_REPORT_TO", "wandb")  # report_to's default when not given
    monkeypatch.setenv("WANDB_PROJECT", "jacrl-env")  # project's default
    tasks = read_tasks(task_file)
    art = tr.grpo(tiny, tasks, None, GRPO, tmp_path / "artifacts", log=lambda m: None)

    (run,) = offline_runs(wandb_dir, f"grpo-{art.key[:16]}")
    assert run["project"] == "jacrl-env" and run["exit_code"] == 0
    hyper = json.loads(json.dumps(dataclasses.asdict(GRPO)))
    assert {k: run["config"][k] for k in hyper} == hyper
    assert run["config"]["artifact_key"] == art.key

    train_rows, steps = metrics(art, "train"), metrics(art, "step")
    assert [r["iteration"] for r in train_rows] == [1, 2] and [s["step"] for s in steps] == [1, 2]
    for key in (
        "reward_mean",
        "reward_std",
        "group_reward_std",
        "kl",
        "truncated",
        "loss",
        "train_loss",
        "learning_rate",
    ):
        assert logged(run, key) == pytest.approx({r["iteration"]: r[key] for r in train_rows}), key
    for key in (
        "generation_s",
        "reward_s",
        "update_s",
        "reward_mean",
        "exact",
        "rollouts",
        "groups_skipped",
        "truncated",
    ):
        assert logged(run, f"step/{key}") == pytest.approx({s["step"]: s[key] for s in steps}), key
    assert no_tracker_files(art)

    monkeypatch.delenv("JACRL_REPORT_TO")
    again = tr.grpo(tiny, tasks, None, GRPO, tmp_path / "artifacts", log=lambda m: None)
    assert again.reused and again.key == art.key


def test_missing_package_or_unknown_service_is_one_line_before_any_work(
    tiny, task_file, wandb_dir, tmp_path, monkeypatch, capsys
):
    arts = tmp_path / "artifacts"
    tasks = read_tasks(task_file)
    before = sorted((wandb_dir / "wandb").glob("offline-run-*"))
    with pytest.raises(
        ValueError,
        match=r"^unknown report_to 'tensorboard'; choose from "
        r"wandb, swanlab$",
    ):
        tr.sft(tiny, tasks, None, SFTConfig(iters=1), arts, report_to="wandb,tensorboard")
    monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` fails as when not installed
    msg = "report_to='wandb' needs the wandb package, which is not installed: pip install wandb"
    for call in (
        lambda: tr.sft(tiny, tasks, None, SFTConfig(iters=1), arts, report_to="wandb"),
        lambda: tr.grpo(tiny, tasks, None, GRPO, arts, report_to=" WandB "),
        lambda: tr.star(tiny, tasks, None, out_root=arts, report_to="wandb"),
    ):
        with pytest.raises(ImportError) as e:
            call()
        assert str(e.value) == msg
    monkeypatch.setenv("JACRL_REPORT_TO", "wandb")
    with pytest.raises(ImportError, match="pip install wandb"):
        tr.rft(tiny, tasks, None, out_root=arts)
    capsys.readouterr()
    argv = ["train", "sft", "--model", tiny, "--tasks", str(task_file), "--out-root", str(arts)]
    assert main(argv + ["--report-to", "wandb"]) == 2
    assert capsys.readouterr().err == f"jacrl: train: {msg}\n"
    assert main(argv + ["--report-to", "tensorboard"]) == 2
    assert capsys.readouterr().err == (
        "jacrl: train: unknown report_to 'tensorboard'; choose from wandb, swanlab\n"
    )
    assert not arts.exists() and sorted((wandb_dir / "wandb").glob("offline-run-*")) == before


def test_training_imports_no_tracker_unless_it_reports_to_one():
    """mlx-lm's callbacks module imports wandb (0.8 s of CPU) for mlx-lm's own callbacks, which
    jacrl does not use: a process that loads the trainers without tracking imports no wandb;
    `report_to="wandb"` afterwards still imports the real one."""
    code = """if True:
        import sys
        import jacrl.train
        import mlx_lm.tuner.callbacks as cb, mlx_lm.tuner.trainer, mlx_lm_lora.trainer.grpo_trainer
        print(cb.wandb is None, "wandb" in sys.modules)
        jacrl.train.report_services("wandb")
        import wandb
        print(callable(wandb.init), wandb.__spec__.origin.endswith("wandb/__init__.py"))
        """
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["True", "False", "True", "True"]
