"""The stage table (`jacrl.stages`): it loads no MLX, every entry's trainer exists, a stage's
config is resolved the one way in `jacrl train` and in a ladder cell, its token limits are fields
of its config, and keys hold only the code a stage imports (`provenance.code_of`), so a new
trainer module re-keys nothing else."""

from __future__ import annotations

import dataclasses
import inspect
import json
import shutil
import subprocess
import sys

import pytest

from jacrl import provenance, stages
from jacrl.conditions import CONDITIONS
from jacrl.stages import STAGES


def test_reading_the_table_loads_no_mlx():
    code = (
        "import sys, jacrl.stages, jacrl.conditions; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mlx', 'mlx_lm')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_entry_names_a_trainer_and_its_parent_use():
    for name, st in STAGES.items():
        fn = stages.trainer_of(name)
        params = inspect.signature(fn).parameters
        assert ("parent" in params) == (st.parent != "none"), name
        assert st.env_prefix == f"JACRL_{name.upper()}_" and stages.CONFIGS[name] is st.config
    assert {c.name for c in CONDITIONS.values() if c.grades} == {
        c.name for c in CONDITIONS.values() if any(STAGES[s].grades for s in c.stages)
    }
    assert [s for s, st in STAGES.items() if st.grades] == ["rft", "star", "grpo", "dpo"]


def test_every_limit_is_a_token_count_of_its_config_and_a_bad_kind_is_refused():
    """Each stage's `limits` name int fields of its config (dotted into a nested one), so
    `jacrl models check` measures every stage; a kind it cannot measure is refused."""
    for name, st in STAGES.items():
        assert st.limits, name  # every stage today has a token limit
        for path, (kind, value) in st.limit_values(st.config()).items():
            assert kind in stages.LIMIT_KINDS and type(value) is int and value > 0, path
    assert STAGES["rft"].limit_values(STAGES["rft"].config())["rft.sft.max_seq_length"] == (
        "example",
        STAGES["rft"].config().sft.max_seq_length,
    )
    with pytest.raises(ValueError, match=r"^stage 'x': limits \{'max_tokens': 'output'\}"):
        dataclasses.replace(STAGES["dpo"], name="x", limits={"max_tokens": "output"})


def test_a_cell_resolves_grpo_as_jacrl_train_does(data_dir, monkeypatch, capsys):
    """JACRL_GRPO_* and JACRL_REWARD_FORMULA reach a cell's GRPO stage (and an sft cell's
    calibration config) exactly as they reach `jacrl train grpo`."""
    from jacrl.cli import main
    from jacrl.ladder import LadderConfig, from_env, make_cell

    monkeypatch.setenv("JACRL_GRPO_BETA", "0.5")
    monkeypatch.setenv("JACRL_GRPO_CALIBRATION_FLOOR", "0.7")
    monkeypatch.setenv("JACRL_REWARD_FORMULA", "additive")
    assert main(["train", "grpo", "--show-config", "--set", "iters=3", "--set", "seed=0"]) == 0
    out = capsys.readouterr().out  # the knobs' help, then the resolved config as JSON
    cli = json.loads(out[out.index("\n{") + 1 :])
    cfg = from_env(LadderConfig(rungs=("1",), data_dir=data_dir, grpo_iters=3))
    cell = make_cell(cfg, "1", condition="raw_grpo", log=lambda _: None)
    assert json.loads(json.dumps(dataclasses.asdict(cell.stages["grpo"]))) == cli
    assert cli["beta"] == 0.5 and cli["reward_formula"] == "additive"
    sft = make_cell(cfg, "1", condition="sft", log=lambda _: None)
    assert sft.reads["grpo"] == cell.stages["grpo"]  # the one resolved config calibrates


def _hashes(package):
    return {s: provenance.code_of([st.module], package) for s, st in STAGES.items()}


def test_a_key_holds_only_the_code_its_stage_imports(tmp_path):
    pkg = tmp_path / "jacrl"
    shutil.copytree(provenance.PACKAGE, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    before = _hashes(pkg)
    # each trainer module its own code (rft and star share one)
    assert len(set(before.values())) == len({st.module for st in STAGES.values()})
    # a new trainer, re-exported by the package: no existing stage's code changes
    (pkg / "train" / "kto.py").write_text(
        "from jacrl.train.sft import sft\n\ndef kto(*a, **k):\n    return sft(*a, **k)\n"
    )
    init = pkg / "train" / "__init__.py"
    init.write_text(init.read_text() + "from jacrl.train.kto import kto\n")
    assert _hashes(pkg) == before
    assert provenance.code_of(["jacrl.train.kto"], pkg) != before["sft"]  # it imports sft's
    # a module only grpo imports: grpo's changes, sft's does not
    loss = pkg / "train" / "grpo_loss.py"
    loss.write_text(loss.read_text() + "\nEXTRA = 1\n")
    after = _hashes(pkg)
    assert after["grpo"] != before["grpo"] and after["sft"] == before["sft"]
    assert after["rft"] == before["rft"]
    # what every stage grades or loads with: all change
    reward = pkg / "ruler" / "reward.py"
    reward.write_text(reward.read_text() + "\nEXTRA = 1\n")
    assert all(v != after[s] for s, v in _hashes(pkg).items() if STAGES[s].grades)
    # the configs' code is no key's (their values are): a new config class re-keys nothing
    config = pkg / "config.py"
    now = _hashes(pkg)
    config.write_text(config.read_text() + "\nclass DPOConfig:\n    beta: float = 0.1\n")
    assert _hashes(pkg) == now


def test_a_cells_code_is_its_stages_and_its_runners():
    from jacrl.ladder.plan import cell_modules

    assert cell_modules("base") == ("jacrl.ladder.cell",)
    assert cell_modules("sft") == ("jacrl.train.sft", "jacrl.train.grpo", "jacrl.ladder.cell")
    assert cell_modules("sft_grpo") == cell_modules("sft")
    assert "jacrl.train.rft" not in cell_modules("raw_grpo")
    files = {
        p.relative_to(provenance.PACKAGE).as_posix()
        for p in provenance.imported_sources(cell_modules("base"))
    }
    # what evaluating runs, the budget formula included (a base cell trains nothing)
    runs = {"evaluate.py", "token_budget.py", "ruler/reward.py", "stats.py", "generate.py"}
    assert runs | {"executor/client.py", "ladder/cell.py"} <= files
    # no trainer it does not run, nothing of the report's, no config's code (its values are
    # the key's)
    assert not {"train/grpo.py", "train/dpo.py", "config.py", "project.py"} & files
    assert not [f for f in files if f.startswith(("report/", "cli/"))]


def test_the_trainers_common_knobs_are_declared_once():
    """SFT, GRPO and DPO share `LoRATraining`'s knobs (declared there, each stage giving only
    its own default and a note); any other knob all three had would belong there too."""
    import dataclasses

    from jacrl.config import DPOConfig, GRPOConfig, LoRATraining, SFTConfig

    shared = {f.name for f in dataclasses.fields(LoRATraining)}
    assert len(shared) == 14
    names = []
    for cls in (SFTConfig, GRPOConfig, DPOConfig):
        assert issubclass(cls, LoRATraining)
        fields = {f.name: f for f in dataclasses.fields(cls)}
        names.append(set(fields))
        for name in shared:  # the base's help opens every stage's
            base = LoRATraining.__dataclass_fields__[name].metadata["help"]
            assert fields[name].metadata["help"].startswith(base), (cls.__name__, name)
    assert set.intersection(*names) - shared == set()
