"""``tooldispatch models ...`` commands, driven through typer's test runner."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tooldispatch.cli.models import models_app
from tooldispatch.models.gguf import write_gguf

runner = CliRunner()


def test_info_json_on_a_file(tmp_path: Path) -> None:
    """``models info PATH --json`` prints the declared type and the real tensor histogram."""
    path = tmp_path / "m.gguf"
    write_gguf(path, {"general.architecture": "llama", "general.file_type": 7}, [("a", (32, 2), 8), ("b", (32,), 0)])
    result = runner.invoke(models_app, ["info", str(path), "--json"])
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert (report["declared_type"], report["tensor_types"], report["n_params"]) == ("Q8_0", {"Q8_0": 1, "F32": 1}, 96)


def test_list_json_names_every_quantization(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``models list --json`` has one row per quantization, with remote ones marked as such."""
    monkeypatch.setenv("TOOLDISPATCH_MODELS_DIR", str(tmp_path))
    result = runner.invoke(models_app, ["list", "--json"])
    assert result.exit_code == 0
    rows = {(r["model"], r["quant"]): r["state"] for r in json.loads(result.stdout)}
    assert rows[("qwen3-32b", "NVFP4")] == "remote"
    assert rows[("smollm2-135m-instruct", "Q4_1")] == "-"
    assert len(rows) == 58


def test_pull_of_remote_model_fails_with_advice(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Pulling a hub-only quantization exits 1 and says to start a server."""
    monkeypatch.setenv("TOOLDISPATCH_MODELS_DIR", str(tmp_path))
    result = runner.invoke(models_app, ["pull", "qwen3-30b-a3b@NVFP4"])
    assert result.exit_code == 1
    assert "is served remotely (nvidia/Qwen3-30B-A3B-NVFP4, engine vllm)" in result.stderr


def test_fault8_info_on_a_crafted_header_is_one_line(tmp_path: Path) -> None:
    """Fault 8: ``models info`` on a header claiming 2**62 array elements exits 1 with a one-line error."""
    path = tmp_path / "crafted.gguf"
    key = b"tokenizer.ggml.scores"
    body = struct.pack("<Q", len(key)) + key + struct.pack("<IIQ", 9, 10, 2**62)
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + body)
    result = runner.invoke(models_app, ["info", str(path)])
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"error: {path} is not a usable GGUF file (the header claims 4611686018427387904")
