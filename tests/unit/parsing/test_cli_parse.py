"""``tooldispatch parse``: reads raw output on stdin, prints the outcome as JSON, exits 2 on bad tools."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from tooldispatch.cli import parse as parse_cli


def _app() -> typer.Typer:
    app = typer.Typer()
    bench = typer.Typer()
    parse_cli.register(app, bench)

    @app.command("noop")
    def noop() -> None:
        """Keep the app a group so the command is called by name."""

    return app


def _tools(tmp_path: Path) -> Path:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([{"type": "function", "function": {"name": "get_time", "parameters": {}}}]))
    return path


def test_prints_outcome_json(tmp_path: Path) -> None:
    """A hermes call on stdin is printed as ParseOutcome.to_dict()."""
    result = CliRunner().invoke(
        _app(),
        ["parse", "--tools", str(_tools(tmp_path))],
        input='Hi <tool_call>{"name": "get_time", "arguments": {}}</tool_call>',
    )
    assert result.exit_code == 0
    out = json.loads(result.stdout)
    assert [(c["name"], c["arguments"], c["bucket"], c["id"]) for c in out["calls"]] == [
        ("get_time", {}, "ok_strict", "call_0")
    ]
    assert (out["content"], out["stage"], out["flags"]) == ("Hi", "strict", [])


def test_finish_reason_length_marks_truncated(tmp_path: Path) -> None:
    """--finish-reason length turns a cut-off call into a Truncated candidate."""
    result = CliRunner().invoke(
        _app(),
        ["parse", "--tools", str(_tools(tmp_path)), "--finish-reason", "length"],
        input='<tool_call>{"name": "get_time", "arguments": {',
    )
    assert result.exit_code == 0
    assert [c["bucket"] for c in json.loads(result.stdout)["candidates"]] == ["Truncated"]


def test_missing_tools_file_exits_2(tmp_path: Path) -> None:
    """A tools path that does not exist is a clear error with exit code 2."""
    result = CliRunner().invoke(_app(), ["parse", "--tools", str(tmp_path / "nope.json")], input="x")
    assert result.exit_code == 2
    assert "does not exist" in result.output


def test_invalid_tools_file_exits_2(tmp_path: Path) -> None:
    """A tools file that is not JSON, or a tool without a name, exits 2 with the reason."""
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    result = CliRunner().invoke(_app(), ["parse", "--tools", str(bad)], input="x")
    assert (result.exit_code, "is not valid JSON" in result.output) == (2, True)
    bad.write_text('[{"parameters": {}}]')
    result = CliRunner().invoke(_app(), ["parse", "--tools", str(bad)], input="x")
    assert (result.exit_code, "has no name" in result.output) == (2, True)


def test_unknown_format_exits_2(tmp_path: Path) -> None:
    """An unknown --format is reported with the known names."""
    result = CliRunner().invoke(_app(), ["parse", "--tools", str(_tools(tmp_path)), "--format", "nope"], input="x")
    assert result.exit_code == 2
    assert "unknown tool_format 'nope'" in result.output


def test_fault7_invalid_utf8_stdin_is_read_with_replacement(tmp_path: Path) -> None:
    """Fault 7: stdin that is not UTF-8 is decoded with U+FFFD replacements, and the output says how many."""
    raw = b'caf\xe9 <tool_call>{"name": "get_time", "arguments": {}}</tool_call> \xff\xfe'
    result = CliRunner().invoke(_app(), ["parse", "--tools", str(_tools(tmp_path))], input=raw)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [(c["name"], c["arguments"]) for c in out["calls"]] == [("get_time", {})]
    assert out["content"] == "caf\ufffd  \ufffd\ufffd"
    assert out["input_note"] == (
        "stdin held 3 byte sequences that are not UTF-8; each was read as U+FFFD (the replacement character)"
    )
