"""Provenance verdicts name what changed: a ladder row records, per stage, the inputs its
artifact's key is made of (`provenance.artifact_inputs`), so a rebuilt adapter with another key is
said to differ in the code of which stage, its data, base model, stage config, parent or other
parts, never a blanket "code differs". Then the rest of jacrl.provenance: what a directory's
hash covers, the file-hash cache, a row's provenance fields, rebuild and row verdicts, an
artifact's key, git_commit, code_hash's errors (the sources a key's code imports:
tests/test_code_graph.py)."""

from __future__ import annotations

import json
import os
import platform

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


# -- what a dir's hash covers, rebuild verdicts, git_commit, imported sources ----------------------


def test_a_dirs_hashes_cover_its_files_below_but_not_hidden_ones(tmp_path):
    """dir_hashes: every regular file under the dir, by relative POSIX path (subdirs too),
    hidden files and docs skipped; dir_hash: sha256 of that map as JSON with sorted keys (a
    path order, where a/b sorts before a.txt, does not change it)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "b").write_bytes(b"1")
    (tmp_path / "a.txt").write_bytes(b"2")
    (tmp_path / ".hidden").write_bytes(b"3")
    (tmp_path / "README.md").write_bytes(b"4")
    got = provenance.dir_hashes(tmp_path)
    assert got == {"a/b": provenance.sha256_bytes(b"1"), "a.txt": provenance.sha256_bytes(b"2")}
    assert provenance.dir_hash(tmp_path) == provenance.sha256_bytes(
        ('{"a.txt": "%s", "a/b": "%s"}' % (got["a.txt"], got["a/b"])).encode()
    )


def test_the_file_hash_cache_tells_files_of_one_size_and_time_apart(tmp_path):
    """file_sha256: cached per file: two files of the same size and mtime keep their own."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"one")
    b.write_bytes(b"two")
    os.utime(a, ns=(1, 10**18))
    os.utime(b, ns=(1, 10**18))
    assert provenance.file_sha256(a) == provenance.sha256_bytes(b"one")
    assert provenance.file_sha256(b) == provenance.sha256_bytes(b"two")


def test_a_rows_provenance_fields(monkeypatch):
    """provenance: commit, code version, versions (python first; "" for a package that is not
    installed), model/adapter hashes ("" without them), data hash, BLAS ("" without
    LD_PRELOAD), time."""
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    tasks = [{"prompt": "p", "answer": "a"}]
    got = provenance.provenance(None, None, tasks)
    assert list(got)[:3] == ["git_commit", "code_version", "python"]
    assert got["python"] == platform.python_version()
    assert (got["model_hash"], got["adapter_hash"], got["adapter_weights_hash"]) == ("", "", "")
    assert got["data_hash"] == provenance.data_hash(tasks) and got["blas"] == ""
    assert (
        got["git_commit"] == provenance.git_commit()
        and got["code_version"] == provenance.code_version()
    )
    assert set(got) >= {"jaclang", "mlx", "mlx-lm", "mlx-lm-lora", "time"}
    assert provenance.versions("no-such-package-jacrl")["no-such-package-jacrl"] == ""


def _artifact(tmp_path, key: str, code: str = "c1", files=None):
    d = tmp_path / key
    d.mkdir()
    parts = {"code_version": code, "base_model": files or {"w": "1"}}
    (d / "manifest.json").write_text(json.dumps({"key": key, "key_parts": parts}))
    return d


def test_a_rebuild_verdict_reads_the_artifact_dir(tmp_path):
    """rebuild_verdict: no manifest is 'adapter missing'; the same dir as recorded is ""; an
    artifact of another key is CHANGED naming the key and what its record says differs (the
    code; the base model from key_parts, or from an older manifest's base_model.files)."""
    assert provenance.rebuild_verdict({}, tmp_path / "none") == "adapter missing"
    d = _artifact(tmp_path, "k1")
    row = {"artifact": "k1", "provenance": {"adapter_hash": provenance.dir_hash(d)}}
    assert provenance.rebuild_verdict(row, d) == ""
    other = _artifact(tmp_path, "k2", code="c2", files={"w": "2"})
    model = provenance.sha256_bytes(json.dumps({"w": "1"}, sort_keys=True).encode())
    was = {"artifact": "k1", "provenance": {"code_version": "c1", "model_hash": model}}
    got = provenance.rebuild_verdict(was, other)
    assert got.startswith(provenance.CHANGED) and "k1 -> k2" in got
    assert got.endswith("; code differs; base model differs)")
    old = tmp_path / "old"
    old.mkdir()
    (old / "manifest.json").write_text(
        json.dumps({"key": "k3", "base_model": {"files": {"w": "2"}}})
    )
    assert provenance.rebuild_verdict(was, old).endswith("; base model differs)")


def test_a_rebuild_without_a_recorded_model_hash_does_not_call_the_model_changed(tmp_path):
    """_identity: a row that recorded no model hash has none ("", not a value that differs
    from every real one), so only the code is named as differing."""
    other = _artifact(tmp_path, "k2", code="c2")
    got = provenance.rebuild_verdict(
        {"artifact": "k1", "provenance": {"code_version": "c1"}}, other
    )
    assert got.endswith("k1 -> k2; code differs)")


def test_rows_without_a_key_and_one_weights_hash_are_unknown():
    """rows_verdict: when either row lacks adapter_weights_hash and the dirs differ, the
    verdict is UNKNOWN, also for rows without an artifact key."""
    a = {"provenance": {"adapter_hash": "d1", "adapter_weights_hash": "w1"}}
    b = {"provenance": {"adapter_hash": "d2"}}
    assert provenance.rows_verdict(a, b) == provenance.rows_verdict(b, a) == provenance.UNKNOWN


def test_git_commit_reads_head_a_ref_or_packed_refs(tmp_path):
    """git_commit: a detached HEAD is the commit; a ref is read from its file, else from
    packed-refs; no .git is ""."""
    git = tmp_path / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("abc123\n")
    assert provenance.git_commit(tmp_path) == "abc123"
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "packed-refs").write_text("# pack-refs\ndef456 refs/heads/main\n")
    assert provenance.git_commit(tmp_path) == "def456"
    (git / "refs" / "heads" / "main").write_text("fed789\n")
    assert provenance.git_commit(tmp_path) == "fed789"
    assert provenance.git_commit(tmp_path / "none") == ""


def test_git_commit_outside_a_project_is_the_packages_checkouts(monkeypatch):
    """git_commit(): the project root's commit; with no project found (a notebook started
    elsewhere), the checkout the package was imported from."""

    def nowhere():
        raise provenance.ProjectNotFound("no jacrl project above the working directory")

    want = provenance.git_commit(provenance.PACKAGE.parent)
    monkeypatch.setattr(provenance, "find_root", nowhere)
    assert provenance.git_commit() == want


def test_a_syntax_error_in_hashed_code_names_its_file(tmp_path):
    """code_hash: a source that does not parse raises SyntaxError naming the file."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f(:\n")
    try:
        provenance.code_hash(bad)
    except SyntaxError as e:
        assert e.filename == str(bad)
    else:
        raise AssertionError("no SyntaxError")


# -- provenance: is a row's adapter the one on disk / in another row? --------------------------


def _hashed_row(key="", weights="", adapter="", code="", model="") -> dict:
    return {
        "artifact": key,
        "provenance": {
            "adapter_weights_hash": weights,
            "adapter_hash": adapter,
            "code_version": code,
            "model_hash": model,
        },
    }


def test_rows_verdict_tells_same_noise_changed_and_unknown():
    same = _hashed_row("k" * 20, "w1", "d1", "c1", "m1")
    assert provenance.rows_verdict(same, dict(same)) == ""
    assert provenance.rows_verdict({}, {"provenance": None}) == ""  # no adapter in either
    assert (
        provenance.rows_verdict(same, _hashed_row("k" * 20, "w2", "d2", "c1", "m1"))
        == provenance.NOISE
    )
    assert provenance.rows_verdict(same, _hashed_row("j" * 20, "w2", "d2", "c2", "m1")) == (
        f"{provenance.CHANGED} (artifact key {'k' * 16} -> {'j' * 16}; code differs)"
    )
    assert provenance.rows_verdict(same, _hashed_row("j" * 20, "w2", "d2", "c2", "m2")) == (
        f"{provenance.CHANGED} (artifact key {'k' * 16} -> {'j' * 16}; code differs; "
        "base model differs)"
    )
    # a key change where neither record says what: no reasons
    assert provenance.rows_verdict(_hashed_row("k" * 20, "w1"), _hashed_row("j" * 20, "w2")) == (
        f"{provenance.CHANGED} (artifact key {'k' * 16} -> {'j' * 16})"
    )
    # a row without weights hashes: the same key rebuilt cannot be told from noise
    assert (
        provenance.rows_verdict(_hashed_row("k", "", "d1"), _hashed_row("k", "", "d2"))
        == provenance.UNKNOWN
    )
    assert provenance.rows_verdict(_hashed_row("k", "", "d1"), _hashed_row("k", "", "d1")) == ""
    assert (
        provenance.rows_verdict(_hashed_row("", "", "d1"), _hashed_row("", "", "d2"))
        == provenance.UNKNOWN
    )
    assert provenance.rows_verdict(_hashed_row("k", "", "d1"), _hashed_row("", "", "d2")) == (
        "adapter changed (no artifact key to tell noise from changed inputs)"
    )
    # the same weights are the same adapter, whatever the dir hashes say
    assert provenance.rows_verdict(_hashed_row("k", "w", "d1"), _hashed_row("k", "w", "d2")) == ""


def test_adapter_key_is_the_manifests_key_or_empty(tmp_path):
    assert provenance.adapter_key(None) == "" and provenance.adapter_key(tmp_path) == ""
    (tmp_path / "manifest.json").write_text('{"key": "abc"}')
    assert provenance.adapter_key(tmp_path) == "abc"
    (tmp_path / "manifest.json").write_text('{"other": 1}')
    assert provenance.adapter_key(str(tmp_path)) == ""
    (tmp_path / "manifest.json").write_text("not json")
    assert provenance.adapter_key(tmp_path) == ""
