"""``tooldispatch parse``: reads raw output on stdin, prints the outcome (``--json``: as JSON), exits 2 on bad tools."""

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


def _policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text('[tools."get_*"]\nread_only = true\n', encoding="utf-8")
    return path


def test_prints_outcome_json(tmp_path: Path) -> None:
    """A hermes call on stdin (its tool declared read-only by --policy) is printed as ParseOutcome.to_dict()."""
    result = CliRunner().invoke(
        _app(),
        ["parse", "--tools", str(_tools(tmp_path)), "--policy", str(_policy(tmp_path)), "--json"],
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
        ["parse", "--tools", str(_tools(tmp_path)), "--finish-reason", "length", "--json"],
        input='<tool_call>{"name": "get_time", "arguments": {',
    )
    assert result.exit_code == 2  # a candidate was rejected
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
    policy = str(_policy(tmp_path))
    result = CliRunner().invoke(
        _app(), ["parse", "--tools", str(_tools(tmp_path)), "--policy", policy, "--json"], input=raw
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [(c["name"], c["arguments"]) for c in out["calls"]] == [("get_time", {})]
    assert out["content"] == "caf\ufffd  \ufffd\ufffd"
    assert out["input_note"] == (
        "stdin held 3 byte sequences that are not UTF-8; each was read as U+FFFD (the replacement character)"
    )


def test_readable_default_shows_calls_then_rejections_with_reasons(tmp_path: Path) -> None:
    """Without --json: one block per call, then each rejected candidate with its reason; exit 2 on a rejection."""
    raw = (
        'Sure. <tool_call>{"name": "get_time", "arguments": {}}</tool_call> '
        '<tool_call>{"name": "get_weather", "arguments": {}}</tool_call>'
    )
    result = CliRunner().invoke(_app(), ["parse", "--tools", str(_tools(tmp_path))], input=raw)
    assert result.exit_code == 2
    lines = result.stdout.splitlines()
    assert lines[:2] == ["call 1: get_time {}", "  bucket ok_strict, strict stage, hermes format"]
    assert lines[2] == "rejected: get_weather {}"
    assert lines[4].startswith("  reason: ")
    assert "get_weather" in lines[4]
    assert lines[5] == '  as written: <tool_call>{"name": "get_weather", "arguments": {}}</tool_call>'
    assert [line for line in lines if line.startswith("call ")] == ["call 1: get_time {}"]


def test_exit_codes_say_what_was_found(tmp_path: Path) -> None:
    """Exit 0 for an accepted call alone, 1 when nothing call-like is found."""
    tools = str(_tools(tmp_path))
    ok = CliRunner().invoke(_app(), ["parse", "--tools", tools], input='{"name": "get_time", "arguments": {}}')
    assert (ok.exit_code, ok.stdout.splitlines()[0]) == (0, "call 1: get_time {}")
    none = CliRunner().invoke(_app(), ["parse", "--tools", tools], input="Just prose.")
    assert (none.exit_code, none.stdout) == (1, "no tool call found\ncontent: Just prose.\n")


def test_tools_may_be_a_tool_source(tmp_path: Path) -> None:
    """--tools demo reads the demo world's declarations through the shared tool-source loader."""
    result = CliRunner().invoke(
        _app(),
        ["parse", "--tools", "demo"],
        input='<tool_call>{"name": "get_order", "arguments": {"order_id": "o-101"}}</tool_call>',
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == 'call 1: get_order {"order_id": "o-101"}'


def test_tools_from_a_json_file_are_side_effecting_without_a_policy(tmp_path: Path) -> None:
    """Without --policy a sentence running into a tag is no call: exit 2, the candidate Ambiguous with its reason."""
    result = CliRunner().invoke(
        _app(),
        ["parse", "--tools", str(_tools(tmp_path)), "--json"],
        input='Hi <tool_call>{"name": "get_time", "arguments": {}}</tool_call>',
    )
    assert result.exit_code == 2
    out = json.loads(result.stdout)
    assert (out["calls"], [c["bucket"] for c in out["candidates"]]) == ([], ["Ambiguous"])
    assert "not declared read-only" in out["candidates"][0]["error"]


def test_a_malformed_policy_is_exit_2_with_the_fault(tmp_path: Path) -> None:
    """--policy with an unknown key exits 2 and names the rule and the keys it takes."""
    bad = tmp_path / "bad.toml"
    bad.write_text('[tools."*"]\nreadonly = true\n', encoding="utf-8")
    result = CliRunner().invoke(_app(), ["parse", "--tools", str(_tools(tmp_path)), "--policy", str(bad)], input="x")
    assert result.exit_code == 2
    assert "[tools.\"*\"] has unknown key(s) 'readonly'; use read_only, destructive, idempotent" in result.output
