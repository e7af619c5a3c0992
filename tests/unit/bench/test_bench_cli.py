"""The bench command line: report and replay on the recorded corpus, clear errors for bad input."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from tooldispatch.cli import app

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "bench" / "bfcl_smollm2_gemma3.jsonl"
runner = CliRunner()


def test_report_writes_every_file_for_a_corpus(tmp_path: Path) -> None:
    """`tooldispatch report CORPUS --html --out DIR` writes the Markdown, JSON, HTML and four charts."""
    result = runner.invoke(app, ["report", str(CORPUS), "--html", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "accuracy.png",
        "buckets.png",
        "false_positives.png",
        "latency.png",
        "report.html",
        "report.md",
        "summary.json",
    ]


def test_replay_prints_the_count_and_compares(tmp_path: Path) -> None:
    """`tooldispatch bench replay` re-scores the corpus and reports unchanged rates against its own summary."""
    summary = CORPUS.with_suffix(".summary.json")
    result = runner.invoke(app, ["bench", "replay", str(CORPUS), "--compare", str(summary)])
    assert result.exit_code == 0, result.output
    lines = CORPUS.read_text().count("\n")
    assert f"re-scored {lines} outputs in " in result.output
    assert "smollm2-135m-instruct@Q4_1 accuracy: unchanged" in result.output


def test_replay_of_a_missing_file_says_what_to_do(tmp_path: Path) -> None:
    """A missing corpus is an error that names what writes one."""
    result = runner.invoke(app, ["bench", "replay", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2
    assert "RUN_DIR/corpus.jsonl" in result.output


def test_bench_commands_default_to_the_packaged_tool_calling_model() -> None:
    """`bench bfcl` and `bench suite` without --models run Qwen2.5-Coder-0.5B Q4_K_M, a model that calls tools."""
    import inspect

    from tooldispatch.cli import bench

    for command in (bench.bfcl, bench.suite):
        assert inspect.signature(command).parameters["models"].default == "qwen2.5-coder-0.5b-instruct@Q4_K_M"
