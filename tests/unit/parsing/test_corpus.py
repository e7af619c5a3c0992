"""Every labelled raw output in the corpus parses to exactly its hand-labelled calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.policy import ToolPolicy
from tooldispatch.toolspec import ToolSpec, normalize_tools

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "corpus"
DECLARED: dict[str, list[dict[str, Any]]] = json.loads((CORPUS / "tools.json").read_text())
# The labels are for tools declared read-only (a call may stand in running text, a name be repaired to a near one).
_READ_ONLY = ToolPolicy.read_only(why="the corpus's labels")
TOOLS: dict[str, list[ToolSpec]] = {
    ref: list(_READ_ONLY.declare(normalize_tools(tools).values())) for ref, tools in DECLARED.items()
}
RECORDS = [json.loads(line) for path in sorted(CORPUS.glob("*.jsonl")) for line in path.read_text().splitlines()]


def test_corpus_is_large_and_covers_both_sources() -> None:
    """The corpus holds at least 150 records, documented and recorded, with positives and negatives."""
    assert len(RECORDS) >= 150
    assert {r["format"] == "recorded" for r in RECORDS} == {True, False}
    assert any(r["expected_calls"] for r in RECORDS if r["format"] == "recorded")
    assert sum(1 for r in RECORDS if not r["expected_calls"]) >= 50
    assert len({r["id"] for r in RECORDS}) == len(RECORDS)


@pytest.mark.parametrize("record", RECORDS, ids=[r["id"] for r in RECORDS])
def test_record_parses_to_its_labels(record: dict[str, Any]) -> None:
    """The parser returns exactly the labelled calls, in order, and the labelled flags."""
    outcome = parse_tool_calls(
        record["text"],
        TOOLS[record["tools_ref"]],
        native_calls=record.get("native_calls"),
        finish_reason=record.get("finish_reason"),
        reasoning_open=record.get("reasoning_open", False),
    )
    assert [{"name": c.name, "arguments": c.arguments} for c in outcome.calls] == record["expected_calls"]
    for flag in record.get("expected_flags", []):
        assert all(flag in c.flags for c in outcome.calls), flag


_WITH_CALLS = [r for r in RECORDS if r["expected_calls"] and not r.get("native_calls")]


@pytest.mark.parametrize("record", _WITH_CALLS, ids=[r["id"] for r in _WITH_CALLS])
def test_an_output_cut_anywhere_with_finish_reason_length_gives_only_whole_calls(record: dict[str, Any]) -> None:
    """Cut after any character and marked ``length``, an output yields only calls its whole text yields."""
    tools = TOOLS[record["tools_ref"]]
    whole = [json.dumps(c, sort_keys=True) for c in record["expected_calls"]]
    text = record["text"]
    for cut in range(1, len(text)):
        outcome = parse_tool_calls(
            text[:cut], tools, finish_reason="length", reasoning_open=record.get("reasoning_open", False)
        )
        for call in outcome.calls:
            found = json.dumps({"name": call.name, "arguments": call.arguments}, sort_keys=True)
            assert found in whole, (text[:cut], found)


@pytest.mark.parametrize("record", _WITH_CALLS, ids=[r["id"] for r in _WITH_CALLS])
def test_an_output_cut_anywhere_yields_no_argument_its_whole_text_lacks(record: dict[str, Any]) -> None:
    """With no finish reason, a cut output may yield a call missing its last arguments, never a changed one."""
    tools = TOOLS[record["tools_ref"]]
    text = record["text"]
    for cut in range(1, len(text)):
        outcome = parse_tool_calls(text[:cut], tools, reasoning_open=record.get("reasoning_open", False))
        for call in outcome.calls:
            assert any(
                call.name == whole["name"] and call.arguments.items() <= whole["arguments"].items()
                for whole in record["expected_calls"]
            ), (text[:cut], call.name, call.arguments)


# What changes when the same tools come as plain dicts, without metadata (side-effecting for the parser): the
# near-match repairs (a name, an enum value, a key) and the calls that are not in a delimited form or alone.
UNDECLARED_LOSES = {
    "doc-hermes-15": "a name one edit away (get_wether): bounded repair only",
    "doc-hermes-24": "an enum value one edit away (celcius): bounded repair only",
    "doc-hermes-25": "a key one edit away (citty): bounded repair only",
    "doc-hermes-20": "a tag inside the reasoning that a sentence runs into (I should call <tool_call>...)",
    "doc-fallback-01": "bare JSON after a sentence on the same line",
    "doc-fallback-02": "a fenced call after an introduction, not the whole output",
    "doc-fallback-06": "a bare call inside a sentence",
    "doc-fallback-16": "bare JSON with prose after it",
}


def test_undeclared_tools_keep_every_label_but_the_repairs_and_running_text_calls() -> None:
    """With the same tools undeclared, exactly the listed records lose their call; every other record is unchanged."""
    lost = []
    for record in RECORDS:
        options = {
            "native_calls": record.get("native_calls"),
            "finish_reason": record.get("finish_reason"),
            "reasoning_open": record.get("reasoning_open", False),
        }
        calls = parse_tool_calls(record["text"], DECLARED[record["tools_ref"]], **options).calls
        got = [{"name": c.name, "arguments": c.arguments} for c in calls]
        if got != record["expected_calls"]:
            assert got == [], record["id"]
            lost.append(record["id"])
    assert sorted(lost) == sorted(UNDECLARED_LOSES)
