"""Contracts of provenance (jacrl.provenance) that mutants of bench/mutation.py survived
(docs/mutation.md): what a directory's hash covers, the file-hash cache, the fields of a row's
provenance, and a rebuild's verdict read from its artifact dir."""

from __future__ import annotations

import json
import os
import platform

from jacrl import provenance as P


def test_a_dirs_hashes_cover_its_files_below_but_not_hidden_ones(tmp_path):
    """dir_hashes: every regular file under the dir, by relative POSIX path (subdirs too),
    hidden files and docs skipped; dir_hash: sha256 of that map as JSON with sorted keys (a
    path order, where a/b sorts before a.txt, does not change it)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "b").write_bytes(b"1")
    (tmp_path / "a.txt").write_bytes(b"2")
    (tmp_path / ".hidden").write_bytes(b"3")
    (tmp_path / "README.md").write_bytes(b"4")
    got = P.dir_hashes(tmp_path)
    assert got == {"a/b": P.sha256_bytes(b"1"), "a.txt": P.sha256_bytes(b"2")}
    assert P.dir_hash(tmp_path) == P.sha256_bytes(
        ('{"a.txt": "%s", "a/b": "%s"}' % (got["a.txt"], got["a/b"])).encode()
    )


def test_the_file_hash_cache_tells_files_of_one_size_and_time_apart(tmp_path):
    """file_sha256: cached per file: two files of the same size and mtime keep their own."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"one")
    b.write_bytes(b"two")
    os.utime(a, ns=(1, 10**18))
    os.utime(b, ns=(1, 10**18))
    assert P.file_sha256(a) == P.sha256_bytes(b"one")
    assert P.file_sha256(b) == P.sha256_bytes(b"two")


def test_a_rows_provenance_fields(monkeypatch):
    """provenance: commit, code version, versions (python first; "" for a package that is not
    installed), model/adapter hashes ("" without them), data hash, BLAS ("" without
    LD_PRELOAD), time."""
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    tasks = [{"prompt": "p", "answer": "a"}]
    got = P.provenance(None, None, tasks)
    assert list(got)[:3] == ["git_commit", "code_version", "python"]
    assert got["python"] == platform.python_version()
    assert (got["model_hash"], got["adapter_hash"], got["adapter_weights_hash"]) == ("", "", "")
    assert got["data_hash"] == P.data_hash(tasks) and got["blas"] == ""
    assert got["git_commit"] == P.git_commit() and got["code_version"] == P.code_version()
    assert set(got) >= {"jaclang", "mlx", "mlx-lm", "mlx-lm-lora", "time"}
    assert P.versions("no-such-package-jacrl")["no-such-package-jacrl"] == ""


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
    assert P.rebuild_verdict({}, tmp_path / "none") == "adapter missing"
    d = _artifact(tmp_path, "k1")
    row = {"artifact": "k1", "provenance": {"adapter_hash": P.dir_hash(d)}}
    assert P.rebuild_verdict(row, d) == ""
    other = _artifact(tmp_path, "k2", code="c2", files={"w": "2"})
    model = P.sha256_bytes(json.dumps({"w": "1"}, sort_keys=True).encode())
    was = {"artifact": "k1", "provenance": {"code_version": "c1", "model_hash": model}}
    got = P.rebuild_verdict(was, other)
    assert got.startswith(P.CHANGED) and "k1 -> k2" in got
    assert got.endswith("; code differs; base model differs)")
    old = tmp_path / "old"
    old.mkdir()
    (old / "manifest.json").write_text(
        json.dumps({"key": "k3", "base_model": {"files": {"w": "2"}}})
    )
    assert P.rebuild_verdict(was, old).endswith("; base model differs)")
