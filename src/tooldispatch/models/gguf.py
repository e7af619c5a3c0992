"""A small reader for GGUF headers: version, metadata key/values and tensor infos.

It reads only the header (never the tensor data), so it is cheap on files of any size and needs no
dependency. Layout (GGUF v2/v3, little-endian)::

    magic "GGUF" | version u32 | tensor_count u64 | kv_count u64
    kv_count    × (key: string, value_type: u32, value)
    tensor_count × (name: string, n_dims: u32, dims: u64 × n_dims, ggml_type: u32, offset: u64)

Strings are a u64 length followed by UTF-8 bytes; arrays are an element type (u32), a count (u64) and
the elements. The tensor data starts at the first multiple of ``general.alignment`` (32 by default) after
the header.

Nothing in the header is trusted: every count and length is checked against the bytes left in the file
before anything is read or allocated for it, and (by default) the tensor data the header promises must
be in the file: a file cut short is refused, however intact its header.
"""

from __future__ import annotations

import os
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
_DEFAULT_ALIGNMENT = 32

GGML_BLOCKS: Mapping[int, tuple[int, int]] = {
    0: (1, 4),  # F32
    1: (1, 2),  # F16
    2: (32, 18),  # Q4_0
    3: (32, 20),  # Q4_1
    6: (32, 22),  # Q5_0
    7: (32, 24),  # Q5_1
    8: (32, 34),  # Q8_0
    9: (32, 36),  # Q8_1
    10: (256, 84),  # Q2_K
    11: (256, 110),  # Q3_K
    12: (256, 144),  # Q4_K
    13: (256, 176),  # Q5_K
    14: (256, 210),  # Q6_K
    15: (256, 292),  # Q8_K
    16: (256, 66),  # IQ2_XXS
    17: (256, 74),  # IQ2_XS
    18: (256, 98),  # IQ3_XXS
    19: (256, 50),  # IQ1_S
    20: (32, 18),  # IQ4_NL
    21: (256, 110),  # IQ3_S
    22: (256, 82),  # IQ2_S
    23: (256, 136),  # IQ4_XS
    24: (1, 1),  # I8
    25: (1, 2),  # I16
    26: (1, 4),  # I32
    27: (1, 8),  # I64
    28: (1, 8),  # F64
    29: (256, 56),  # IQ1_M
    30: (1, 2),  # BF16
    34: (256, 54),  # TQ1_0
    35: (256, 66),  # TQ2_0
    39: (32, 17),  # MXFP4
}
"""``ggml_type`` id → (elements per block, bytes per block), from ``ggml.c``'s type traits. A type not listed
here (a newer one) has an unknown size: its data is checked only for starting inside the file."""


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

    @property
    def n_bytes(self) -> int | None:
        """Bytes of data the tensor takes, or ``None`` for a type whose block size this reader does not know."""
        block = GGML_BLOCKS.get(self.type_id)
        if block is None:
            return None
        per_block, size = block
        rows = self.n_elements // self.shape[0] if self.shape and self.shape[0] else 0
        return rows * -(-self.shape[0] // per_block) * size if self.shape else size


@dataclass(frozen=True, slots=True)
class GGUFHeader:
    """What a GGUF header says.

    Attributes:
        version: GGUF format version.
        metadata: every metadata key/value (arrays become lists).
        tensors: tensor infos in file order.
        data_offset: where the tensor data section starts in the file (0 when not read from a file).
        file_size: the file's size in bytes (0 when not read from a file).
    """

    version: int
    metadata: Mapping[str, Any] = field(default_factory=dict)
    tensors: tuple[TensorInfo, ...] = ()
    data_offset: int = 0
    file_size: int = 0

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
    """Reads the header, refusing any count or length that the bytes left in the file cannot hold."""

    def __init__(self, fh: BinaryIO, size: int) -> None:
        self._fh = fh
        self._size = size

    @property
    def left(self) -> int:
        return self._size - self._fh.tell()

    def fits(self, count: int, min_bytes: int, what: str) -> None:
        """Refuse ``count`` items of at least ``min_bytes`` each when the rest of the file is smaller."""
        if count * min_bytes > self.left:
            raise GGUFError(
                f"the header claims {count} {what}, more than the {self.left} bytes left in the file can hold "
                "(corrupt or truncated file)"
            )

    def take(self, n: int) -> bytes:
        self.fits(n, 1, "bytes")
        data = self._fh.read(n)
        if len(data) != n:
            raise GGUFError("the header ends early (truncated file)")
        return data

    def skip(self, n: int) -> None:
        self.fits(n, 1, "bytes")
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
            self.fits(count, struct.calcsize(_SCALARS[etype]) if etype in _SCALARS else 8, "array elements")
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


def read_header(path: str | Path, *, skip_arrays: bool = True, check_data: bool = True) -> GGUFHeader:
    """Read a GGUF file's header.

    Args:
        path: the ``.gguf`` file.
        skip_arrays: replace arrays (vocabularies, merges) by a length marker instead of decoding them;
            decoding a 49k-token vocabulary costs time that ``info`` does not need.
        check_data: refuse a file that ends before the tensor data its header promises (see ``check_data``).

    Returns:
        The version, metadata and tensor infos.

    Raises:
        GGUFError: the file is not GGUF, its header is truncated or corrupt, or (with ``check_data``) its
            tensor data is missing.
        OSError: the file cannot be opened.
    """
    with open(path, "rb") as fh:
        r = _Reader(fh, os.fstat(fh.fileno()).st_size)
        magic = fh.read(4)
        if magic != GGUF_MAGIC:
            raise GGUFError(f"not a GGUF file (magic {magic!r}, expected {GGUF_MAGIC!r})")
        version = r.scalar("<I")
        if version not in (2, 3):
            raise GGUFError(f"unsupported GGUF version {version} (this reader knows 2 and 3)")
        n_tensors = r.scalar("<Q")
        n_kv = r.scalar("<Q")
        r.fits(n_kv, 8 + 4 + 1, "metadata entries")  # key length, value type, the smallest value
        r.fits(n_tensors, 8 + 4 + 4 + 8, "tensors")  # name length, n_dims, type, offset
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
        alignment = metadata.get("general.alignment", _DEFAULT_ALIGNMENT)
        if (
            not isinstance(alignment, int)
            or isinstance(alignment, bool)
            or alignment <= 0
            or alignment & (alignment - 1)
        ):
            raise GGUFError(f"general.alignment is {alignment!r}, not a power of two (corrupt header)")
        end = fh.tell()
        header = GGUFHeader(
            version=version,
            metadata=metadata,
            tensors=tuple(tensors),
            data_offset=-(-end // alignment) * alignment,
            file_size=r._size,
        )
    if check_data:
        check_tensor_data(header)
    return header


def check_tensor_data(header: GGUFHeader) -> None:
    """Check that the file holds all the tensor data its header promises.

    Each tensor's data (its offset in the data section plus its size from its type and shape) must end
    inside the file. For a type of unknown size, its data must at least start inside the file.

    Raises:
        GGUFError: a tensor's shape is impossible for its type, or the file ends before its data does
            (the message says how many bytes are missing).
    """
    available = header.file_size - header.data_offset
    need = 0
    for t in header.tensors:
        n_bytes = t.n_bytes
        block = GGML_BLOCKS.get(t.type_id)
        if block is not None and t.shape and t.shape[0] % block[0]:
            raise GGUFError(
                f"tensor {t.name!r} has rows of {t.shape[0]} elements, not a multiple of the {block[0]}-element "
                f"blocks of {t.type_name} (corrupt header)"
            )
        need = max(need, t.offset + (n_bytes if n_bytes is not None else 1))
    if need > available:
        raise GGUFError(
            f"the file ends {need - max(available, 0)} bytes before the tensor data its header promises "
            f"({header.data_offset + need} bytes expected, {header.file_size} present): it is truncated"
        )


def write_gguf(path: str | Path, metadata: Mapping[str, Any], tensors: list[tuple[str, tuple[int, ...], int]]) -> None:
    """Write a GGUF v3 file whose tensor data is all zero bytes, for tests and fixtures.

    Args:
        path: where to write.
        metadata: key/values; ``str`` → STRING, ``bool`` → BOOL, ``int`` → UINT32 (INT64 when negative or
            large), ``float`` → FLOAT32, ``list[str]`` / ``list[int]`` → ARRAY.
        tensors: ``(name, shape, ggml_type)`` triples, of types listed in ``GGML_BLOCKS``.
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
        n_bytes = TensorInfo(name, shape, type_id, offset).n_bytes or 0
        offset += -(-n_bytes // _DEFAULT_ALIGNMENT) * _DEFAULT_ALIGNMENT
    out += bytes(-len(out) % _DEFAULT_ALIGNMENT) + bytes(offset)
    Path(path).write_bytes(bytes(out))
