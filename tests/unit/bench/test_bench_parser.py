"""bench parser: corpus loading, the peers, scoring and Markdown rendering (timings are not tested)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.table import Table

from tooldispatch.bench.parser import (
    SWEEP_TOOLS,
    Recovery,
    baseline_calls,
    call_key,
    json_repair_calls,
    load_corpus,
    payloads,
    stream_text,
    sweep_outputs,
)
from tooldispatch.cli.parser_bench import markdown
from tooldispatch.errors import ConfigError

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]


def _write(tmp_path: Path, lines: list[dict[str, object]]) -> Path:
    (tmp_path / "tools.json").write_text(json.dumps({"weather": TOOLS}), encoding="utf-8")
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    return tmp_path


def test_load_corpus_resolves_tools_ref_and_inline_tools(tmp_path: Path) -> None:
    """Records get their tools from tools.json by reference, or inline, and labels become call keys."""
    corpus = _write(
        tmp_path,
        [
            {
                "id": "r1",
                "tools_ref": "weather",
                "text": "t",
                "expected_calls": [{"name": "get_weather", "arguments": {}}],
            },
            {"id": "r2", "tools": TOOLS, "text": "u", "expected_calls": [], "finish_reason": "length"},
        ],
    )
    records = load_corpus(corpus)
    assert [r.id for r in records] == ["r1", "r2"]
    assert list(records[0].tools) == ["get_weather"]
    assert records[0].expected == (("get_weather", "{}"),)
    assert records[1].finish_reason == "length"


def test_load_corpus_names_the_bad_line(tmp_path: Path) -> None:
    """A record without a required field is reported with its file and line."""
    corpus = _write(tmp_path, [{"id": "r1", "tools_ref": "weather", "text": "t"}])
    with pytest.raises(ConfigError, match=r"a\.jsonl:1: malformed corpus record"):
        load_corpus(corpus)


def test_load_corpus_unknown_ref(tmp_path: Path) -> None:
    """A tools_ref missing from tools.json is a ConfigError naming it."""
    corpus = _write(tmp_path, [{"id": "r1", "tools_ref": "nope", "text": "t", "expected_calls": []}])
    with pytest.raises(ConfigError, match="tools_ref 'nope'"):
        load_corpus(corpus)


def test_empty_corpus_dir(tmp_path: Path) -> None:
    """A directory without records says how to point at the corpus."""
    with pytest.raises(ConfigError, match="pass --corpus"):
        load_corpus(tmp_path)


def test_payloads_are_tag_bodies_or_the_text() -> None:
    """The peers decode ``<tool_call>`` bodies when there are any, else the whole text."""
    assert payloads("a<tool_call>{1}</tool_call>b<tool_call>{2}</tool_call>") == ["{1}", "{2}"]
    assert payloads('{"name": "x"}') == ['{"name": "x"}']


def test_baseline_and_json_repair_peers() -> None:
    """The strict baseline only reads valid JSON; json_repair also reads single quotes and trailing commas."""
    good = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    sloppy = "<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Oslo',}}</tool_call>"
    expected = [call_key("get_weather", {"city": "Oslo"})]
    assert baseline_calls(good) == expected
    assert baseline_calls(sloppy) == []
    assert json_repair_calls(sloppy) == expected


def test_recovery_counts_exact_and_wrong() -> None:
    """A record scores its exactly matched calls, the extra ones, and whether it was entirely right."""
    recovery = Recovery("m")
    a, b, c = ("f", "{}"), ("g", "{}"), ("h", "{}")
    recovery.add([a, b], [a, c])
    recovery.add([a], [a])
    assert (recovery.expected, recovery.exact, recovery.wrong, recovery.records, recovery.records_right) == (
        3,
        2,
        1,
        2,
        1,
    )


def test_stream_text_reaches_the_size(tmp_path: Path) -> None:
    """The long streaming input is at least the requested size and uses one tool set."""
    corpus = _write(
        tmp_path, [{"id": "r1", "tools_ref": "weather", "text": "<tool_call>{}</tool_call>", "expected_calls": []}]
    )
    text, tools = stream_text(load_corpus(corpus), size=5000)
    assert len(text) >= 5000
    assert list(tools) == ["get_weather"]


def test_markdown_table() -> None:
    """A rich table renders as a titled GitHub Markdown table."""
    table = Table(title="T")
    table.add_column("a")
    table.add_column("b")
    table.add_row("1", "2")
    assert markdown(table) == "**T**\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"


def test_cli_prints_every_table_for_a_small_corpus(tmp_path: Path) -> None:
    """``bench parser --markdown`` on a two-record corpus prints recovery, buckets, speed, the three ratios and the
    two figures against the model's pace."""
    from typer.testing import CliRunner

    from tooldispatch.cli import app

    good = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    sloppy = "<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Rome',}}</tool_call>"
    corpus = _write(
        tmp_path,
        [
            {
                "id": "g",
                "tools_ref": "weather",
                "text": good,
                "expected_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}],
            },
            {
                "id": "s",
                "tools_ref": "weather",
                "text": sloppy,
                "expected_calls": [{"name": "get_weather", "arguments": {"city": "Rome"}}],
            },
        ],
    )
    result = CliRunner().invoke(app, ["bench", "parser", "--corpus", str(corpus), "--rounds", "1", "--markdown"])
    assert result.exit_code == 0, result.output
    assert "| tooldispatch: + repair | 2/2 | 100.0% | 2/2 | 0 |" in result.output
    assert "| json.loads only (strict baseline) | 1/2 | 50.0% | 1/2 | 0 |" in result.output
    for name in (
        "strict path / bare json.loads",
        "json_repair / full cascade, malformed",
        "StreamParser 1-char",
        "StreamParser p99 per 4-char delta / 1 % of a token's time",
        "whole parse / 1 % of the turn's decode time",
    ):
        assert name in result.output


def test_cli_reports_a_missing_corpus(tmp_path: Path) -> None:
    """Pointing ``--corpus`` at a directory without records exits with status 2 and says how to fix it."""
    from typer.testing import CliRunner

    from tooldispatch.cli import app

    result = CliRunner().invoke(app, ["bench", "parser", "--corpus", str(tmp_path)])
    assert result.exit_code == 2
    assert "pass --corpus" in result.output


@pytest.mark.parametrize("kb", [0.1, 10.0])
def test_sweep_outputs_are_one_call_written_well_and_malformed(kb: float) -> None:
    """Each sweep size is one write_note call, well-formed and with single quotes and trailing commas."""
    import json_repair

    from tooldispatch.parsing.core import parse_tool_calls

    good, good_payload, bad, bad_payload, arguments = sweep_outputs(kb)
    assert len(arguments["text"]) == round(kb * 1000)
    assert json.loads(good_payload) == {"name": "write_note", "arguments": arguments}
    assert json_repair.loads(bad_payload) == {"name": "write_note", "arguments": arguments}
    assert (good, bad) == (f"<tool_call>\n{good_payload}\n</tool_call>", f"<tool_call>\n{bad_payload}\n</tool_call>")
    for text, bucket in ((good, "ok_strict"), (bad, "ok_fallback")):
        calls = parse_tool_calls(text, SWEEP_TOOLS).calls
        assert [(c.name, c.arguments, c.bucket) for c in calls] == [("write_note", arguments, bucket)]
