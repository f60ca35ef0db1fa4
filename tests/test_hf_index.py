"""jacrl.models.hf_index: transformers' scan of its model files, kept on disk, gives the table the
scan gives, and a changed, added or removed file is scanned again."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from jacrl.models import hf_index

CHECK = """
import json, os, sys
import jacrl
from jacrl.models import hf_index
from transformers import AutoTokenizer  # transformers/__init__ and transformers.models scan
import transformers.utils.import_utils as iu
models = os.path.join(os.path.dirname(iu.__file__), os.pardir, "models")
fresh = iu.define_import_structure.__wrapped__.__wrapped__  # transformers' own, uncached
kept = hf_index.kept(lambda *a: sys.exit("the kept table was scanned again"))
same = [kept(models, p) == fresh(models, p) for p in ("models", None)]
print(json.dumps({"same": same, "files": sorted(os.listdir(hf_index.cache_dir()))}))
"""


def _run(cache) -> dict:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    out = subprocess.run(
        [sys.executable, "-c", CHECK], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_the_kept_table_is_the_scans_table(tmp_path):
    """The first process scans and keeps both of transformers' tables; a second reads them back
    without scanning, and they equal transformers' own uncached scan."""
    first = _run(tmp_path)
    assert first["same"] == [True, True] and len(first["files"]) >= 2
    second = _run(tmp_path)
    assert second == first


def test_a_changed_added_or_removed_file_is_a_new_key(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    pkg = tmp_path / "pkg"
    (pkg / "a").mkdir(parents=True)
    (pkg / "a" / "m.py").write_text("__all__ = ['A']\n")
    scans = []

    def scan(path, prefix=None):
        scans.append(path)
        return {frozenset({"tokenizers"}): {f"a.m{len(scans)}": {"A", "B"}}}

    def table():  # a new process's view: nothing in memory
        hf_index._files_digest.cache_clear()
        return hf_index.kept(scan)(str(pkg))

    assert table() == table() == {frozenset({"tokenizers"}): {"a.m1": {"A", "B"}}}
    assert len(scans) == 1
    os.utime(pkg / "a" / "m.py", ns=(1, 1))
    assert table() == {frozenset({"tokenizers"}): {"a.m2": {"A", "B"}}}
    (pkg / "a" / "n.py").write_text("")
    table()
    (pkg / "a" / "n.py").unlink()
    os.utime(pkg / "a" / "m.py", ns=(2, 2))
    table()
    assert len(scans) == 4 and table() == {frozenset({"tokenizers"}): {"a.m4": {"A", "B"}}}


def test_an_unreadable_or_torn_cache_means_the_scan(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "pkg").mkdir()
    calls = []

    def scan(path, prefix=None):
        calls.append(prefix)
        return {frozenset(): {"x": {"X"}}}

    assert hf_index.kept(scan)(str(tmp_path / "pkg"), "p") == {frozenset(): {"x": {"X"}}}
    (kept,) = os.listdir(hf_index.cache_dir())
    (tmp_path / "cache" / "jacrl" / "transformers-index" / kept).write_text('[[["a"]')
    assert hf_index.kept(scan)(str(tmp_path / "pkg"), "p") == {frozenset(): {"x": {"X"}}}
    assert calls == ["p", "p"]
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))  # no cache can be made there
    assert hf_index.kept(scan)(str(tmp_path / "pkg"), "p") == {frozenset(): {"x": {"X"}}}
    assert calls == ["p", "p", "p"]
