"""`check_header`: a GGUF file's header read and checked in pure Python before any native reader
(MLX's) sees it, so a crafted header is one error, never a crash of the process.

Written from the GGUF format's published description (llama.cpp's docs/gguf.md): the magic
`GGUF`, a uint32 version, uint64 tensor and key-value counts; then each key-value (a string key,
a uint32 value type, the value: a scalar, a string = uint64 length + UTF-8 bytes, or an array =
uint32 element type + uint64 count + elements); then each tensor's info (a string name, uint32
n_dims, n_dims uint64 dims, uint32 ggml type, uint64 offset into the data section, which starts at
the next multiple of `general.alignment`, 32 by default). All little-endian.

Every count and length is checked against the bytes left before it is used, every tensor's data
against the file's size, and only what the importer supports passes: versions 2 and 3, no nested
arrays, 1 to 4 dimensions, F32/F16/Q4_0/Q4_1/Q8_0 tensors.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"GGUF"
VERSIONS = (2, 3)
MAX_DIMS = 4
MAX_KEY = 1 << 16  # bytes of a key or tensor name (llama.cpp's keys are a few dozen)
DEFAULT_ALIGNMENT = 32
# ggml type -> (elements per block, bytes per block) for the types the importer reads
TENSOR_TYPES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 8: (32, 34)}
TYPE_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 8: "Q8_0"}
# GGUF value type -> struct format of a scalar (8 = string, 9 = array are read apart)
_SCALARS = dict(enumerate("BbHhIif?")) | {10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9
_MIN_KV = 8 + 4 + 1  # an empty key, a type, a one-byte value
_MIN_TENSOR = 8 + 4 + 8 + 4 + 8  # an empty name, n_dims, one dim, type, offset


class HeaderError(ValueError):
    """What is wrong with the header, in a few words (the caller names the file)."""


@dataclass(frozen=True)
class Header:
    version: int
    metadata: dict  # key -> value (an array of strings as a list, a numeric array as a list)
    tensors: dict  # name -> (dims, type name)


class _Reader:
    def __init__(self, buf) -> None:
        self.buf, self.pos, self.size = buf, 0, len(buf)

    def left(self) -> int:
        return self.size - self.pos

    def take(self, fmt: str, what: str):
        n = struct.calcsize("<" + fmt)
        if n > self.left():
            raise HeaderError(f"truncated header ({what} past the end of the file)")
        (v,) = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += n
        return v

    def string(self, what: str, limit: int | None = None) -> str:
        n = self.take("Q", f"{what}'s length")
        if n > self.left() or (limit is not None and n > limit):
            raise HeaderError(f"{what} of {n} bytes (at most {limit or self.left()})")
        raw = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise HeaderError(f"{what} that is not UTF-8") from None

    def value(self, vtype: int, key: str, nested: bool = False):
        if vtype in _SCALARS:
            return self.take(_SCALARS[vtype], f"{key}'s value")
        if vtype == STRING:
            return self.string(f"a string in {key}")
        if vtype == ARRAY and not nested:
            etype = self.take("I", f"{key}'s element type")
            n = self.take("Q", f"{key}'s length")
            if etype not in _SCALARS and etype != STRING:
                raise HeaderError(f"{key}: an array of value type {etype} (nested or unknown)")
            least = 8 if etype == STRING else struct.calcsize("<" + _SCALARS[etype])
            if n * least > self.left():
                raise HeaderError(f"{key}: an array of {n} items, more than the file holds")
            return [self.value(etype, key, nested=True) for _ in range(n)]
        raise HeaderError(f"{key}: value type {vtype} (known: 0-12, arrays not nested)")


def _nbytes(name: str, dims: list[int], ttype: int) -> int:
    per_block, block_bytes = TENSOR_TYPES[ttype]
    if dims[0] % per_block:
        raise HeaderError(f"tensor {name}: first dimension {dims[0]} not a multiple of {per_block}")
    count = 1
    for d in dims:
        count *= d
    return count // per_block * block_bytes


def check_header(path: Path) -> Header:
    """The header of the GGUF file `path`, checked; HeaderError says what is wrong."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        if f.read(4) != MAGIC:
            raise HeaderError("not a GGUF file (no GGUF magic)")
    if size < 24:
        raise HeaderError(f"{size} bytes, shorter than a GGUF header")
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        r = _Reader(buf)
        r.pos = 4
        version = r.take("I", "version")
        if version not in VERSIONS:
            raise HeaderError(f"GGUF version {version} (supported: {VERSIONS})")
        n_tensors, n_kv = r.take("Q", "tensor count"), r.take("Q", "key count")
        if n_kv * _MIN_KV + n_tensors * _MIN_TENSOR > r.left():
            raise HeaderError(f"{n_kv} keys and {n_tensors} tensors, more than the file holds")
        meta: dict = {}
        for _ in range(n_kv):
            key = r.string("a key", MAX_KEY)
            meta[key] = r.value(r.take("I", f"{key}'s type"), key)
        tensors, spans = {}, []
        for _ in range(n_tensors):
            name = r.string("a tensor name", MAX_KEY)
            n_dims = r.take("I", f"tensor {name}'s n_dims")
            if not 1 <= n_dims <= MAX_DIMS:
                raise HeaderError(f"tensor {name}: {n_dims} dimensions (1 to {MAX_DIMS})")
            dims = [r.take("Q", f"tensor {name}'s dims") for _ in range(n_dims)]
            if min(dims) < 1:
                raise HeaderError(f"tensor {name}: dimensions {dims}")
            ttype, offset = r.take("I", f"tensor {name}'s type"), r.take("Q", f"{name}'s offset")
            if ttype not in TENSOR_TYPES:
                known = "/".join(TYPE_NAMES.values())
                raise HeaderError(f"tensor {name}: ggml type {ttype} (supported: {known})")
            if name in tensors:
                raise HeaderError(f"tensor {name} twice")
            tensors[name] = (dims, TYPE_NAMES[ttype])
            spans.append((name, offset, _nbytes(name, dims, ttype)))
        align = meta.get("general.alignment", DEFAULT_ALIGNMENT)
        if not isinstance(align, int) or align < 1 or align & (align - 1):
            raise HeaderError(f"general.alignment {align!r} (a power of two)")
        start = -(-r.pos // align) * align
        for name, offset, nbytes in spans:
            if offset % align or start + offset + nbytes > size:
                raise HeaderError(
                    f"tensor {name}: {nbytes} bytes at offset {offset} of the data section, "
                    f"past the end of the file ({size} bytes) or not aligned to {align}"
                )
    return Header(version, meta, tensors)
