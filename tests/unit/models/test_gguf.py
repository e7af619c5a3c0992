"""The GGUF header reader, on tiny files written by the test."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tooldispatch.errors import ModelNotFoundError
from tooldispatch.models import GGUFError, info, read_header
from tooldispatch.models.gguf import write_gguf

TENSORS = [
    ("token_embd.weight", (576, 10), 8),
    ("blk.0.attn_q.weight", (576, 576), 2),
    ("blk.0.attn_k.weight", (576, 192), 2),
    ("blk.0.attn_norm.weight", (576,), 0),
]


def _tiny(path: Path) -> Path:
    meta = {
        "general.architecture": "llama",
        "general.name": "tiny",
        "general.file_type": 2,
        "llama.rope.freq_base": 10000.0,
        "tokenizer.ggml.add_bos_token": False,
        "tokenizer.ggml.tokens": ["<s>", "a", "b"],
        "tokenizer.chat_template": "{{ messages[0]['content'] }}",
    }
    write_gguf(path, meta, TENSORS)
    return path


def test_header_roundtrip(tmp_path: Path) -> None:
    """Metadata values of each type and every tensor info come back as written."""
    header = read_header(_tiny(tmp_path / "t.gguf"), skip_arrays=False)
    assert header.version == 3
    assert header.metadata["general.architecture"] == "llama"
    assert header.metadata["general.file_type"] == 2
    assert header.metadata["llama.rope.freq_base"] == 10000.0
    assert header.metadata["tokenizer.ggml.add_bos_token"] is False
    assert header.metadata["tokenizer.ggml.tokens"] == ["<s>", "a", "b"]
    assert [(t.name, t.shape, t.type_name) for t in header.tensors] == [
        ("token_embd.weight", (576, 10), "Q8_0"),
        ("blk.0.attn_q.weight", (576, 576), "Q4_0"),
        ("blk.0.attn_k.weight", (576, 192), "Q4_0"),
        ("blk.0.attn_norm.weight", (576,), "F32"),
    ]


def test_arrays_are_skipped_by_default(tmp_path: Path) -> None:
    """Without decoding, an array is replaced by a marker that keeps its length."""
    header = read_header(_tiny(tmp_path / "t.gguf"))
    assert repr(header.metadata["tokenizer.ggml.tokens"]) == "<array of 3>"
    assert header.chat_template == "{{ messages[0]['content'] }}"


def test_declared_type_and_histogram(tmp_path: Path) -> None:
    """The declared file type is named, and tensors are counted per real type, most common first."""
    header = read_header(_tiny(tmp_path / "t.gguf"))
    assert header.file_type == "Q4_0"
    assert header.type_histogram() == {"Q4_0": 2, "Q8_0": 1, "F32": 1}


def test_info_reports_types_and_weights(tmp_path: Path) -> None:
    """``info`` reports declared type, the real histogram and the number of weights."""
    report = info(_tiny(tmp_path / "t.gguf"))
    assert (report.declared_type, report.architecture, report.name) == ("Q4_0", "llama", "tiny")
    assert dict(report.tensor_types) == {"Q4_0": 2, "Q8_0": 1, "F32": 1}
    assert report.n_params == 576 * 10 + 576 * 576 + 576 * 192 + 576
    assert report.has_chat_template is True


def test_not_gguf(tmp_path: Path) -> None:
    """A file without the GGUF magic is refused, naming the magic it found."""
    path = tmp_path / "x.gguf"
    path.write_bytes(b"GGML" + b"\0" * 20)
    with pytest.raises(GGUFError, match=r"not a GGUF file \(magic b'GGML'"):
        read_header(path)


def test_truncated_header(tmp_path: Path) -> None:
    """A header cut short is reported as truncated."""
    full = _tiny(tmp_path / "t.gguf").read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(full[: len(full) - 10])
    with pytest.raises(GGUFError, match=r"truncated"):
        read_header(cut)


def test_unsupported_version(tmp_path: Path) -> None:
    """GGUF v1 files are refused with the versions this reader knows."""
    path = tmp_path / "v1.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 1, 0, 0))
    with pytest.raises(GGUFError, match=r"unsupported GGUF version 1 \(this reader knows 2 and 3\)"):
        read_header(path)


def test_info_on_garbage_says_to_pull_again(tmp_path: Path) -> None:
    """``info`` on an unreadable file is a ModelNotFoundError telling the user to pull again."""
    path = tmp_path / "bad.gguf"
    path.write_bytes(b"not a model")
    with pytest.raises(ModelNotFoundError, match=r"is not a usable GGUF file .*pull it again with --force"):
        info(path)


def _crafted_array(path: Path, count: int) -> Path:
    """A GGUF header whose only metadata entry is an array of UINT64 claiming ``count`` elements."""
    key = b"tokenizer.ggml.scores"
    body = struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, 10, count) + struct.pack("<Q", 7) * 4
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + body)
    return path


def test_fault8_crafted_array_count_is_a_gguf_error(tmp_path: Path) -> None:
    """Fault 8: an array of UINT64 claiming 2**62 elements is refused by the file size, not decoded."""
    path = _crafted_array(tmp_path / "crafted.gguf", 2**62)
    with pytest.raises(GGUFError, match=r"claims 4611686018427387904 array elements, more than the 32 bytes left"):
        read_header(path, skip_arrays=False)
    with pytest.raises(GGUFError, match=r"claims 4611686018427387904 array elements"):
        read_header(path)


def test_fault8_crafted_counts_are_bounded_by_the_file(tmp_path: Path) -> None:
    """Fault 8: tensor and metadata counts larger than the file can hold are refused before any loop runs."""
    path = tmp_path / "counts.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 2**40, 0))
    with pytest.raises(GGUFError, match=r"claims 1099511627776 tensors"):
        read_header(path)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 2**40))
    with pytest.raises(GGUFError, match=r"claims 1099511627776 metadata entries"):
        read_header(path)


def test_fault8_truncated_tensor_data_is_refused(tmp_path: Path) -> None:
    """Fault 8: a file whose header is whole but whose tensor data is cut short is refused as truncated."""
    full = _tiny(tmp_path / "t.gguf").read_bytes()
    header = read_header(tmp_path / "t.gguf")
    assert [t.n_bytes for t in header.tensors] == [10 * 18 * 34, 576 * 18 * 18, 192 * 18 * 18, 576 * 4]
    assert header.file_size == len(full) == header.data_offset + header.tensors[-1].offset + 576 * 4
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(full[: header.data_offset + 1000])
    with pytest.raises(GGUFError, match=r"before the tensor data its header promises .* it is truncated"):
        read_header(cut)
    assert read_header(cut, check_data=False).tensors == header.tensors


def test_fault8_models_info_reports_one_line(tmp_path: Path) -> None:
    """Fault 8: ``info`` turns a crafted or truncated file into one ModelNotFoundError line, no traceback."""
    with pytest.raises(ModelNotFoundError, match=r"is not a usable GGUF file \(the header claims 4611686018427387904"):
        info(_crafted_array(tmp_path / "crafted.gguf", 2**62))
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(_tiny(tmp_path / "t.gguf").read_bytes()[:4096])
    with pytest.raises(ModelNotFoundError, match=r"it is truncated\); pull it again with --force"):
        info(cut)
