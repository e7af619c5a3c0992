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
