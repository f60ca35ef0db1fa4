"""Provenance verdicts name what changed: a ladder row records, per stage, the inputs its
artifact's key is made of (`provenance.artifact_inputs`), so a rebuilt adapter with another key is
said to differ in the code of which stage, its data, base model, stage config, parent or other
parts, never a blanket "code differs"."""

from __future__ import annotations

import json

from jacrl import provenance
from jacrl.provenance import CHANGED, artifact_inputs, rebuild_verdict, rows_verdict

PARTS = {
    "condition": "sft_grpo",
    "stage": "grpo",
    "base_model": {"model.safetensors": "m1"},
    "data": {"train": "d1"},
    "hyperparameters": {"learning_rate": 1e-5},
    "code_version": "c1",
    "parent": "p" * 20,
    "system_prompt": "s1",
}


def _row(key: str, **changed) -> dict:
    """A ladder row of an sft_grpo cell whose grpo artifact has `key`, made of PARTS + changed."""
    return {
        "artifact": key,
        "provenance": {"adapter_weights_hash": "w" + key, "code_version": "everything"},
        "ladder": {
            "artifact_keys": {"sft": "p" * 20, "grpo": key},
            "artifact_inputs": {"grpo": artifact_inputs({**PARTS, **changed})},
        },
    }


def _changed(*what: str) -> str:
    return (
        f"{CHANGED} (artifact key {'k' * 16} -> {'j' * 16}"
        + "".join(f"; {w} differs" for w in what)
        + ")"
    )


def test_a_changed_key_names_each_input_that_changed():
    was = _row("k" * 20)
    assert rows_verdict(was, _row("k" * 20)) == ""
    for change, what in (
        ({"code_version": "c2"}, ["code of grpo"]),
        ({"data": {"train": "d2"}}, ["data"]),
        ({"base_model": {"model.safetensors": "m2"}}, ["base model"]),
        ({"hyperparameters": {"learning_rate": 1e-4}}, ["stage config"]),
        ({"parent": "q" * 20}, ["parent"]),
        ({"system_prompt": "s2"}, ["other"]),
        ({"code_version": "c2", "data": {"train": "d2"}}, ["code of grpo", "data"]),
    ):
        assert rows_verdict(was, _row("j" * 20, **change)) == _changed(*what), change


def test_a_rebuilt_artifact_on_disk_names_the_input_that_changed(tmp_path):
    """Against the manifest of the artifact now on disk; a row without the inputs (older) keeps
    the record-level comparison."""
    d = tmp_path / "sft_grpo-jjjj"
    d.mkdir()
    parts = {**PARTS, "hyperparameters": {"learning_rate": 1e-4}}
    (d / "manifest.json").write_text(json.dumps({"key": "j" * 20, "key_parts": parts}))
    assert rebuild_verdict(_row("k" * 20), d) == _changed("stage config")
    old = _row("k" * 20)
    del old["ladder"]
    assert rebuild_verdict(old, d).startswith(_changed()[:-1])
    assert provenance.rows_verdict(old, old) == ""
