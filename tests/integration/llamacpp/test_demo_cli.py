"""``tooldispatch demo --seeds N``: one line per seed and mode, the tally, and a transcript per run (SmolLM2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tooldispatch.cli import app

pytestmark = pytest.mark.integration

runner = CliRunner()


def test_seeds_print_one_line_each_and_the_tally(smollm2_path: Path, tmp_path: Path) -> None:
    """Two seeds in prompt mode: a line per seed, 'task done in K of 2 seeds', and seed0/seed1 transcripts."""
    out = runner.invoke(
        app,
        [
            "demo",
            "--model",
            "smollm2-135m-instruct@Q4_1",
            "--seeds",
            "2",
            "--modes",
            "prompt",
            "--max-turns",
            "1",
            "--max-tokens",
            "16",
            "--transcripts",
            str(tmp_path),
        ],
        terminal_width=200,
    )
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    assert sum(1 for line in lines if line.startswith("  seed 0 prompt ")) == 1
    assert sum(1 for line in lines if line.startswith("  seed 1 prompt ")) == 1
    assert any(line.startswith("prompt mode: task done in ") and line.count(" of 2 seeds") == 1 for line in lines)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["seed0-prompt.json", "seed1-prompt.json"]
    record = json.loads((tmp_path / "seed1-prompt.json").read_text())
    assert (record["seed"], record["mode"]) == (1, "prompt")
    assert len(record["transcript"]["turns"]) == 1


def test_unknown_mode_is_refused_before_loading_anything() -> None:
    """--modes takes prompt and/or constrained; anything else is a one-line error, exit 2."""
    out = runner.invoke(app, ["demo", "--modes", "prompt,greedy"], terminal_width=200)
    assert out.exit_code == 2
    assert " ".join(out.output.split()) == (
        "error: --modes takes prompt and/or constrained, comma-separated; got 'prompt,greedy'"
    )
