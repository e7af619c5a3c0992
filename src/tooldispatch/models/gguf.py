"""A small reader for GGUF headers: version, metadata key/values and tensor infos.

It reads only the header (never the tensor data), so it is cheap on files of any size and needs no
dependency. Layout (GGUF v2/v3, little-endian)::

    magic "GGUF" | version u32 | tensor_count u64 | kv_count u64
    kv_count    × (key: string, value_type: u32, value)
    tensor_count × (name: string, n_dims: u32, dims: u64 × n_dims, ggml_type: u32, offset: u64)

Strings are a u64 length followed by UTF-8 bytes; arrays are an element type (u32), a count (u64) and
the elements.
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

GGUF_MAGIC = b"GGUF"

GGML_TYPES: Mapping[int, str] = {
    0: "F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    6: "Q5_0",
    7: "Q5_1",
    8: "Q8_0",
    9: "Q8_1",
    10: "Q2_K",
    11: "Q3_K",
    12: "Q4_K",
    13: "Q5_K",
    14: "Q6_K",
    15: "Q8_K",
    16: "IQ2_XXS",
    17: "IQ2_XS",
    18: "IQ3_XXS",
    19: "IQ1_S",
    20: "IQ4_NL",
    21: "IQ3_S",
    22: "IQ2_S",
    23: "IQ4_XS",
    24: "I8",
    25: "I16",
    26: "I32",
    27: "I64",
    28: "F64",
    29: "IQ1_M",
    30: "BF16",
    34: "TQ1_0",
    35: "TQ2_0",
    39: "MXFP4",
    40: "NVFP4",
    41: "Q1_0",
    42: "Q2_0",
}
"""``ggml_type`` ids as stored per tensor (from ``ggml.h``)."""

LLAMA_FTYPES: Mapping[int, str] = {
    0: "ALL_F32",
    1: "F16",
    2: "Q4_0",
    3: "Q4_1",
    7: "Q8_0",
    8: "Q5_0",
    9: "Q5_1",
    10: "Q2_K",
    11: "Q3_K_S",
    12: "Q3_K_M",
    13: "Q3_K_L",
    14: "Q4_K_S",
    15: "Q4_K_M",
    16: "Q5_K_S",
    17: "Q5_K_M",
    18: "Q6_K",
    19: "IQ2_XXS",
    20: "IQ2_XS",
    21: "Q2_K_S",
    22: "IQ3_XS",
    23: "IQ3_XXS",
    24: "IQ1_S",
    25: "IQ4_NL",
    26: "IQ3_S",
    27: "IQ3_M",
    28: "IQ2_S",
    29: "IQ2_M",
    30: "IQ4_XS",
    31: "IQ1_M",
    32: "BF16",
    36: "TQ1_0",
    37: "TQ2_0",
    38: "MXFP4_MOE",
    39: "NVFP4",
}
"""``llama_ftype`` ids, the file-level type declared in ``general.file_type`` (from ``llama.h``)."""

_SCALARS: Mapping[int, str] = {
    0: "<B",  # UINT8
    1: "<b",  # INT8
    2: "<H",  # UINT16
    3: "<h",  # INT16
    4: "<I",  # UINT32
    5: "<i",  # INT32
    6: "<f",  # FLOAT32
    7: "<?",  # BOOL
    10: "<Q",  # UINT64
    11: "<q",  # INT64
    12: "<d",  # FLOAT64
}
_STRING = 8
_ARRAY = 9
_MAX_STRING = 1 << 28  # 256 MiB; a longer string means the header is corrupt


class GGUFError(ValueError):
    """The file is not a readable GGUF file."""


@dataclass(frozen=True, slots=True)
class TensorInfo:
    """One tensor as declared in the header.

    Attributes:
        name: tensor name (``blk.0.attn_q.weight``).
        shape: dimensions, innermost first, as GGUF stores them.
        type_id: the ``ggml_type`` id.
        offset: byte offset of the data inside the data section.
    """

    name: str
    shape: tuple[int, ...]
    type_id: int
    offset: int

    @property
    def type_name(self) -> str:
        """The ``ggml_type`` name (``Q4_1``), or ``type<id>`` for ids this reader does not know."""
        return GGML_TYPES.get(self.type_id, f"type{self.type_id}")

    @property
    def n_elements(self) -> int:
        """Number of elements in the tensor."""
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True, slots=True)
class GGUFHeader:
    """What a GGUF header says.

    Attributes:
        version: GGUF format version.
        metadata: every metadata key/value (arrays become lists).
        tensors: tensor infos in file order.
    """

    version: int
    metadata: Mapping[str, Any] = field(default_factory=dict)
    tensors: tuple[TensorInfo, ...] = ()

    @property
    def file_type(self) -> str | None:
        """The declared ``general.file_type`` as a name (``Q4_1``), or ``None`` when absent."""
        ft = self.metadata.get("general.file_type")
        if not isinstance(ft, int):
            return None
        return LLAMA_FTYPES.get(ft, f"ftype{ft}")

    @property
    def architecture(self) -> str | None:
        """``general.architecture`` (``qwen2``, ``llama``), when the file says."""
        arch = self.metadata.get("general.architecture")
        return arch if isinstance(arch, str) else None

    @property
    def context_length(self) -> int | None:
        """The trained context length (``<architecture>.context_length``), when the file says."""
        n = self.metadata.get(f"{self.architecture}.context_length")
        return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None

    @property
    def chat_template(self) -> str | None:
        """The model's own Jinja chat template (``tokenizer.chat_template``), when the file has one."""
        tpl = self.metadata.get("tokenizer.chat_template")
        return tpl if isinstance(tpl, str) else None

    def type_histogram(self) -> dict[str, int]:
        """Count tensors per ``ggml_type`` name, most common first."""
        return dict(Counter(t.type_name for t in self.tensors).most_common())


class _Reader:
    def __init__(self, fh: BinaryIO) -> None:
        self._fh = fh

    def take(self, n: int) -> bytes:
        data = self._fh.read(n)
        if len(data) != n:
            raise GGUFError("the header ends early (truncated file)")
        return data

    def skip(self, n: int) -> None:
        self._fh.seek(n, 1)

    def scalar(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        n = self.scalar("<Q")
        if n > _MAX_STRING:
            raise GGUFError(f"a header string claims {n} bytes (corrupt header)")
        return self.take(n).decode("utf-8", errors="replace")

    def value(self, vtype: int, *, skip_arrays: bool) -> Any:
        fmt = _SCALARS.get(vtype)
        if fmt is not None:
            return self.scalar(fmt)
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype = self.scalar("<I")
            count = self.scalar("<Q")
            if etype == _ARRAY or (etype not in _SCALARS and etype != _STRING):
                raise GGUFError(f"unsupported array element type {etype}")
            if not skip_arrays:
                return [self.value(etype, skip_arrays=False) for _ in range(count)]
            if etype in _SCALARS:
                self.skip(struct.calcsize(_SCALARS[etype]) * count)
            else:
                for _ in range(count):
                    self.skip(self.scalar("<Q"))
            return _SkippedArray(count)
        raise GGUFError(f"unknown metadata value type {vtype}")


@dataclass(frozen=True, slots=True)
class _SkippedArray:
    """Stands in for a large array (token lists) when arrays are skipped."""

    length: int

    def __repr__(self) -> str:
        return f"<array of {self.length}>"


def read_header(path: str | Path, *, skip_arrays: bool = True) -> GGUFHeader:
    """Read a GGUF file's header.

    Args:
        path: the ``.gguf`` file.
        skip_arrays: replace arrays (vocabularies, merges) by a length marker instead of decoding them;
            decoding a 49k-token vocabulary costs time that ``info`` does not need.

    Returns:
        The version, metadata and tensor infos.

    Raises:
        GGUFError: the file is not GGUF, or its header is truncated or corrupt.
        OSError: the file cannot be opened.
    """
    with open(path, "rb") as fh:
        r = _Reader(fh)
        magic = fh.read(4)
        if magic != GGUF_MAGIC:
            raise GGUFError(f"not a GGUF file (magic {magic!r}, expected {GGUF_MAGIC!r})")
        version = r.scalar("<I")
        if version not in (2, 3):
            raise GGUFError(f"unsupported GGUF version {version} (this reader knows 2 and 3)")
        n_tensors = r.scalar("<Q")
        n_kv = r.scalar("<Q")
        metadata: dict[str, Any] = {}
        for _ in range(n_kv):
            key = r.string()
            vtype = r.scalar("<I")
            metadata[key] = r.value(vtype, skip_arrays=skip_arrays)
        tensors = []
        for _ in range(n_tensors):
            name = r.string()
            n_dims = r.scalar("<I")
            if n_dims > 8:
                raise GGUFError(f"tensor {name!r} claims {n_dims} dimensions (corrupt header)")
            shape = tuple(r.scalar("<Q") for _ in range(n_dims))
            type_id = r.scalar("<I")
            offset = r.scalar("<Q")
            tensors.append(TensorInfo(name=name, shape=shape, type_id=type_id, offset=offset))
    return GGUFHeader(version=version, metadata=metadata, tensors=tuple(tensors))


def write_gguf(path: str | Path, metadata: Mapping[str, Any], tensors: list[tuple[str, tuple[int, ...], int]]) -> None:
    """Write a header-only GGUF v3 file (no tensor data), for tests and fixtures.

    Args:
        path: where to write.
        metadata: key/values; ``str`` → STRING, ``bool`` → BOOL, ``int`` → UINT32 (INT64 when negative or
            large), ``float`` → FLOAT32, ``list[str]`` / ``list[int]`` → ARRAY.
        tensors: ``(name, shape, ggml_type)`` triples.
    """

    def s(text: str) -> bytes:
        raw = text.encode("utf-8")
        return struct.pack("<Q", len(raw)) + raw

    def typed(value: Any) -> tuple[int, bytes]:
        if isinstance(value, bool):
            return 7, struct.pack("<?", value)
        if isinstance(value, int):
            if 0 <= value < 1 << 32:
                return 4, struct.pack("<I", value)
            return 11, struct.pack("<q", value)
        if isinstance(value, float):
            return 6, struct.pack("<f", value)
        if isinstance(value, str):
            return _STRING, s(value)
        if isinstance(value, list):
            parts = [typed(v) for v in value]
            etype = parts[0][0] if parts else 4
            return _ARRAY, struct.pack("<IQ", etype, len(parts)) + b"".join(p[1] for p in parts)
        raise TypeError(f"cannot write {type(value).__name__} into GGUF metadata")

    out = bytearray(GGUF_MAGIC + struct.pack("<IQQ", 3, len(tensors), len(metadata)))
    for key, value in metadata.items():
        vtype, raw = typed(value)
        out += s(key) + struct.pack("<I", vtype) + raw
    offset = 0
    for name, shape, type_id in tensors:
        out += s(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
        out += struct.pack("<IQ", type_id, offset)
        offset += 32
    Path(path).write_bytes(bytes(out))
