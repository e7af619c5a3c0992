"""A llama.cpp tool that fails half-way leaves no partial file behind to be mistaken for a result."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tooldispatch.errors import BackendUnavailable
from tooldispatch.models.quantize import importance_matrix

_HALF_WRITER = """#!/bin/sh
# Writes part of its output file (the argument after -o), then fails as a crashed tool would.
while [ $# -gt 0 ]; do
    if [ "$1" = "-o" ]; then printf 'GGUF partial' > "$2"; fi
    shift
done
echo "out of memory" >&2
exit 3
"""


def test_failed_importance_matrix_leaves_no_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """llama-imatrix exiting non-zero after writing part of its output: a one-line error, and no file remains."""
    tool = tmp_path / "tools" / "bin" / "llama-imatrix"
    tool.parent.mkdir(parents=True)
    tool.write_text(_HALF_WRITER, encoding="utf-8")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("LLAMA_SERVER_HOME", str(tmp_path / "tools"))
    src = tmp_path / "cache" / "Q4_K_M.gguf"
    src.parent.mkdir()
    src.write_bytes(b"GGUF")
    with pytest.raises(BackendUnavailable) as err:
        importance_matrix(src, nthread=1)
    assert str(err.value) == "llama-imatrix on Q4_K_M.gguf failed (exit 3): out of memory"
    assert sorted(p.name for p in src.parent.iterdir()) == ["Q4_K_M.gguf"]
