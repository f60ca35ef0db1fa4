"""`jacrl models import` against bad or hostile input (issue 58): a taken name is never replaced
without `--force` (a built-in model never without `--replace-builtin` too), a failed or killed
import leaves nothing in models/, a crafted GGUF header is one line before MLX's native reader
sees it, bad metadata in the real file is one line, and a chat template that loops for ever is
stopped within its time bound wherever a prompt is rendered."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jacrl.cli import main
from jacrl.models import chat_template
from jacrl.models.gguf_import import clean_staging, import_gguf
from jacrl.models.registry import ModelError

ROOT = Path(__file__).resolve().parents[1]
SLOW = "{% for a in range(99999) %}{% for b in range(99999) %}{{ b }}{% endfor %}{% endfor %}"


def _hashes(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _project(tmp_path: Path) -> Path:
    """A bare project: jacrl.toml and a registry holding one entry of the user's."""
    (tmp_path / "jacrl.toml").write_text('[project]\nname = "t"\n')
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "registry.toml").write_text('[models.keep]\npath = "x"\n')
    return tmp_path


def _cli(root: Path, *args: str, capsys) -> tuple[int, str]:
    """`jacrl --root ROOT models import ARGS` in this process: (exit code, stderr)."""
    before = os.environ.get("JACRL_ROOT")
    try:
        rc = main(["--root", str(root), "models", "import", *args])
    finally:  # --root sets JACRL_ROOT for the children a run starts: not for the next test
        os.environ.pop("JACRL_ROOT", None)
        if before is not None:
            os.environ["JACRL_ROOT"] = before
    return rc, capsys.readouterr().err


# --- crafted headers, built here from the format's description --------------------------------


def _s(text: str | bytes, length: int | None = None) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw) if length is None else length) + raw


def _gguf(**bad) -> bytes:
    """A ~16 KB GGUF v3: general.architecture = llama and one 32x2 F32 tensor; `bad` breaks one
    field (key_len, n_kv, n_tensors, n_dims, offset, array_len, ttype)."""
    kv = _s("general.architecture", bad.get("key_len")) + struct.pack("<I", 8) + _s("llama")
    kv += _s("general.tags") + struct.pack("<IIQ", 9, 8, bad.get("array_len", 1)) + _s("x")
    n_dims = bad.get("n_dims", 2)
    dims = [32, 2] if n_dims == 2 else [1] * n_dims
    info = _s("token_embd.weight") + struct.pack(f"<I{len(dims)}Q", n_dims, *dims)
    info += struct.pack("<IQ", bad.get("ttype", 0), bad.get("offset", 0))
    head = b"GGUF" + struct.pack("<IQQ", 3, bad.get("n_tensors", 1), bad.get("n_kv", 2))
    body = head + kv + info
    body += b"\0" * (-len(body) % 32) + struct.pack("<64f", *range(64))
    return body + b"\0" * (16384 - len(body))


CRAFTED = {
    "key_len": (1 << 62, "a key of 4611686018427387904 bytes"),
    "n_kv": (1 << 60, "keys and 1 tensors, more than the file holds"),
    "n_tensors": (1 << 60, "tensors, more than the file holds"),
    "n_dims": (64, "64 dimensions (1 to 4)"),
    "offset": (1 << 40, "past the end of the file"),
    "array_len": (1 << 61, "an array of 2305843009213693952 items"),
    "ttype": (12, "ggml type 12 (supported: F32/F16/Q4_0/Q4_1/Q8_0)"),
}


def test_the_unbroken_header_passes_the_check(tmp_path):
    """The control: without its break the crafted file is a readable GGUF (MLX reads it), so
    each case below fails for its own field."""
    import mlx.core as mx

    from jacrl.models.gguf_header import check_header

    good = tmp_path / "good.gguf"
    good.write_bytes(_gguf())
    header = check_header(good)
    assert header.metadata["general.architecture"] == "llama"
    assert header.tensors == {"token_embd.weight": ([32, 2], "F32")}
    tensors = mx.load(str(good))
    assert tensors["token_embd.weight"].shape == (2, 32)


@pytest.mark.parametrize("field", sorted(CRAFTED))
def test_a_crafted_header_is_one_line_and_leaves_nothing(field, tmp_path, capsys):
    value, want = CRAFTED[field]
    root = _project(tmp_path)
    bad = tmp_path / f"{field}.gguf"
    bad.write_bytes(_gguf(**{field: value}))
    assert bad.stat().st_size == 16384
    rc, err = _cli(root, str(bad), "--name", "evil", capsys=capsys)
    assert rc == 2 and err.count("\n") == 1, err
    assert bad.name in err and want in err and "supported:" in err, err
    assert sorted(p.name for p in (root / "models").iterdir()) == ["registry.toml"]
    assert (root / "models" / "registry.toml").read_text() == '[models.keep]\npath = "x"\n'


def test_a_native_reader_that_dies_is_one_line(smollm2_gguf, tmp_path, monkeypatch):
    """Defence in depth: MLX's reader runs in a child first; the child's death (here an abort in
    place of the read) is one line, and the import leaves nothing."""
    from jacrl.models import gguf

    monkeypatch.setattr(gguf, "CHILD_READ", "import os; os.abort()")
    models = tmp_path / "models"
    with pytest.raises(ModelError) as e:
        import_gguf(smollm2_gguf, "m", models_dir=models, registry=models / "registry.toml")
    msg = str(e.value)
    assert "\n" not in msg and smollm2_gguf.name in msg and "died on it (SIGABRT)" in msg
    assert list(models.iterdir()) == []


# --- bad metadata in the real file: same-length byte patches, offsets unchanged ----------------


@pytest.fixture(scope="module")
def gguf_bytes(smollm2_gguf) -> bytes:
    return smollm2_gguf.read_bytes()


def _patched(data: bytes, old: bytes, new: bytes) -> bytes:
    assert len(old) == len(new) and data.count(old) == 1
    return data.replace(old, new)


def _template_field(data: bytes) -> bytes:
    """The chat template's string in the file: key, type 8 (string), length, bytes."""
    key = _s("tokenizer.chat_template") + struct.pack("<I", 8)
    at = data.index(key) + len(key)
    (n,) = struct.unpack_from("<Q", data, at)
    return data[at + 8 : at + 8 + n]


@pytest.mark.parametrize("case", ["zero_heads", "bad_merge", "eos_out_of_range"])
def test_bad_metadata_is_one_line(case, gguf_bytes, tmp_path):
    if case == "zero_heads":
        key = _s("llama.attention.head_count") + struct.pack("<I", 4)
        old = key + struct.pack("<I", 9)
        data, want = _patched(gguf_bytes, old, key + struct.pack("<I", 0)), "head_count = 0"
    elif case == "bad_merge":
        # the first merge "Ġ t" (its length prefix keeps it unique) becomes one token, no pair
        old = _s("Ġ t")
        data, want = _patched(gguf_bytes, old, _s("Ġ_t")), "BPE merge 0 'Ġ_t'"
    else:
        key = _s("tokenizer.ggml.eos_token_id") + struct.pack("<I", 4)
        old = key + struct.pack("<I", 2)
        data = _patched(gguf_bytes, old, key + struct.pack("<I", 10**9))
        want = "eos_token_id 1000000000"
    bad = tmp_path / f"{case}.gguf"
    bad.write_bytes(data)
    models = tmp_path / "models"
    with pytest.raises(ModelError) as e:
        import_gguf(bad, "m", models_dir=models, registry=models / "registry.toml")
    assert "\n" not in str(e.value) and bad.name in str(e.value) and want in str(e.value)
    assert list(models.iterdir()) == []


def test_a_looping_template_is_refused_at_import_within_the_bound(gguf_bytes, tmp_path):
    old = _template_field(gguf_bytes)
    slow = SLOW.encode()
    slow += b"{#" + b"x" * (len(old) - len(slow) - 4) + b"#}"
    bad = tmp_path / "slow.gguf"
    bad.write_bytes(_patched(gguf_bytes, old, slow))
    models = tmp_path / "models"
    t = time.monotonic()
    with pytest.raises(ModelError) as e:
        import_gguf(bad, "m", dtype="q4", models_dir=models, registry=models / "registry.toml")
    msg = str(e.value)
    assert "\n" not in msg and "slow.gguf" in msg and "tokenizer.chat_template" in msg
    assert f"did not render within {chat_template.RENDER_LIMIT_S:g} s" in msg
    assert time.monotonic() - t < 60  # the conversion itself takes ~10 s on a loaded host
    assert list(models.iterdir()) == []


# --- names: never replaced unasked ------------------------------------------------------------


def test_a_users_folder_is_never_replaced_without_force(smollm2_gguf, tmp_path, capsys):
    root = _project(tmp_path)
    mine = root / "models" / "my-model"
    mine.mkdir()
    (mine / "config.json").write_text('{"model_type": "mine"}\n')
    (mine / "weights.bin").write_bytes(os.urandom(4096))
    before = _hashes(root / "models")
    rc, err = _cli(root, str(smollm2_gguf), "--name", "my-model", capsys=capsys)
    assert rc == 2 and err.count("\n") == 1 and "models/my-model exists" in err
    assert "--force" in err
    assert _hashes(root / "models") == before
    # a registry entry alone takes the name too (it points elsewhere)
    rc, err = _cli(root, str(smollm2_gguf), "--name", "keep", capsys=capsys)
    assert rc == 2 and "the registry has a model of that name" in err
    assert _hashes(root / "models") == before


def test_a_failing_forced_import_keeps_the_old_model(tmp_path):
    root = _project(tmp_path)
    mine = root / "models" / "my-model"
    mine.mkdir()
    (mine / "config.json").write_text("{}\n")
    before = _hashes(root / "models")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(_gguf(n_dims=64))
    models = root / "models"
    reg = models / "registry.toml"
    with pytest.raises(ModelError):
        import_gguf(bad, "my-model", models_dir=models, registry=reg, force=True)
    assert _hashes(models) == before
    assert sorted(p.name for p in models.iterdir()) == ["my-model", "registry.toml"]


def test_another_dtype_over_an_import_is_refused_and_the_same_is_up_to_date(smollm2_gguf, tmp_path):
    """An earlier import's record (config.json's jacrl_import, written here by hand) decides:
    the same file and options is up to date and rewrites nothing; bf16 over f32 is refused."""
    from jacrl.provenance import file_sha256

    models = tmp_path / "models"
    m = models / "m"
    m.mkdir(parents=True)
    record = {"gguf": smollm2_gguf.name, "gguf_sha256": file_sha256(smollm2_gguf)}
    record |= {"dtype": "f32", "rope": "unpermute"}
    (m / "config.json").write_text(json.dumps({"jacrl_import": record}))
    (m / "model.safetensors").write_bytes(b"f32 weights")
    reg = models / "registry.toml"
    kw = {"models_dir": models, "registry": reg}
    r = import_gguf(smollm2_gguf, "m", dtype="f32", **kw)
    assert r.skipped and '[models.m]\npath = "models/m"' in reg.read_text()
    before = _hashes(models)
    with pytest.raises(ModelError) as e:
        import_gguf(smollm2_gguf, "m", dtype="bf16", **kw)
    assert "holds an import of" in str(e.value) and "dtype f32" in str(e.value)
    assert _hashes(models) == before


def test_jac_tiny_is_refused_even_with_force(smollm2_gguf, capsys):
    """The real project's tracked model: refused before anything is read or written."""
    tiny = ROOT / "models" / "jac-tiny"
    before, reg = _hashes(tiny), (ROOT / "models" / "registry.toml").read_text()
    rc, err = _cli(ROOT, str(smollm2_gguf), "--name", "jac-tiny", "--force", capsys=capsys)
    assert rc == 2 and err.count("\n") == 1 and "built-in model" in err
    assert "--replace-builtin" in err
    assert _hashes(tiny) == before and (ROOT / "models" / "registry.toml").read_text() == reg


def test_an_entry_marked_builtin_is_refused_even_with_force(smollm2_gguf, tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    reg = models / "registry.toml"
    reg.write_text('[models.base]\npath = "models/base"\nbuiltin = true\n')
    with pytest.raises(ModelError, match="built-in model"):
        import_gguf(smollm2_gguf, "base", models_dir=models, registry=reg, force=True)
    assert sorted(p.name for p in models.iterdir()) == ["registry.toml"]


# --- staging: removed on failure, on a signal, and after a kill ---------------------------------


def test_sigterm_mid_import_leaves_no_staging(smollm2_gguf, tmp_path):
    """SIGTERM while the converted model waits in its staging folder: exit 143, nothing left. The
    child's convert (the real one) then waits for the signal, so the test cannot race an import
    that finishes first (CI, stop 65: the whole import took less than a loaded runner's stall)."""
    models = tmp_path / "models"
    models.mkdir()
    ready = tmp_path / "converted"
    code = (
        "import sys, time; from pathlib import Path; import jacrl.models.gguf_import as gi\n"
        "real = gi.convert\n"
        "def convert(*a, **k):\n"
        "    config = real(*a, **k)\n"
        "    Path(sys.argv[3]).touch()\n"
        "    time.sleep(600)\n"
        "    return config\n"
        "gi.convert = convert\n"
        "m = Path(sys.argv[2]); gi.import_gguf(sys.argv[1], 'm', models_dir=m, "
        "registry=m / 'registry.toml')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = tmp_path / "stderr.txt"
    with open(log, "w") as err:
        p = subprocess.Popen(
            [sys.executable, "-c", code, str(smollm2_gguf), str(models), str(ready)],
            env=env,
            stderr=err,
        )
    try:
        deadline = time.monotonic() + 300
        while not ready.exists() and time.monotonic() < deadline:
            assert p.poll() is None, f"the import ended first: {log.read_text()[-2000:]}"
            time.sleep(0.05)
        assert ready.exists(), "the import did not convert within 300 s"
        staged = list(models.glob(".import-*"))
        assert len(staged) == 1 and (staged[0] / "model" / "model.safetensors").is_file()
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=60) == 128 + signal.SIGTERM, log.read_text()[-2000:]
    finally:  # a failed check leaves no child sleeping out its 600 s
        if p.poll() is None:
            p.kill()
            p.wait()
    assert list(models.iterdir()) == []


def test_a_killed_imports_staging_is_cleaned_and_its_model_put_back(tmp_path):
    """A staging folder whose import was SIGKILLed between its two renames (the replaced model
    inside, models/NAME gone): the next import moves the model back and removes the folder."""
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], stdout=-1)
    dead = int(done.stdout)
    models = tmp_path / "models"
    stale = models / f".import-{dead}-abc"
    (stale / "replaced").mkdir(parents=True)
    (stale / "replaced" / "config.json").write_text("{}\n")
    (stale / "target").write_text("mine")
    (stale / "model").mkdir()
    live = models / f".import-{os.getpid()}-xyz"  # this process is alive: left alone
    live.mkdir()
    clean_staging(models)
    assert sorted(p.name for p in models.iterdir()) == [live.name, "mine"]
    assert (models / "mine" / "config.json").read_text() == "{}\n"
    shutil.rmtree(live)


# --- chat templates: bounded wherever a prompt is rendered --------------------------------------


@pytest.fixture
def slow_tiny(tmp_path) -> Path:
    """jac-tiny's files with a chat template that loops for ever (weights linked, not copied)."""
    out = tmp_path / "slow-tiny"
    out.mkdir()
    for f in (ROOT / "models" / "jac-tiny").iterdir():
        (out / f.name).symlink_to(f)
    (out / "chat_template.jinja").unlink()
    (out / "chat_template.jinja").write_text(SLOW)
    return out


def test_a_looping_template_is_stopped_when_a_prompt_is_rendered(slow_tiny, monkeypatch):
    from jacrl.models.registry import load
    from jacrl.prompts import prompt_ids

    monkeypatch.setattr(chat_template, "RENDER_LIMIT_S", 1.0)
    _, tok = load(slow_tiny, fresh=True)
    t = time.monotonic()
    with pytest.raises(chat_template.TemplateTooSlow) as e:
        prompt_ids(tok, "Write a walker.")
    assert time.monotonic() - t < 5
    msg = str(e.value)
    assert "\n" not in msg and "slow-tiny" in msg and "chat_template.jinja" in msg
    assert "did not render within 1 s" in msg


def test_models_check_stops_a_looping_template(slow_tiny, capsys):
    """The CLI with the real bound: one line, exit 2, within a few seconds of the bound."""
    t = time.monotonic()
    rc = main(["models", "check", str(slow_tiny)])
    took = time.monotonic() - t
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "did not render within" in err, err
    assert took < chat_template.RENDER_LIMIT_S + 20, took
