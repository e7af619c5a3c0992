"""``parse_tool_calls(tolerant=False)``: the strict formats on the content, each call as written, nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from tooldispatch.parsing.core import parse_tool_calls

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "ls",
            "parameters": {"type": "object", "properties": {"a": {"type": "boolean"}}, "additionalProperties": False},
        },
    }
]


def _read(text: str, **kwargs: Any) -> tuple[list[tuple[str, dict[str, Any], str]], str, list[str]]:
    outcome = parse_tool_calls(text, TOOLS, tolerant=False, **kwargs)
    calls = [(c.name, c.arguments, c.bucket) for c in outcome.calls]
    return calls, outcome.content, [c.bucket for c in outcome.rejected]


def test_a_call_written_whole_and_valid_is_read_as_by_the_tolerant_parser() -> None:
    text = '<tool_call>\n{"name": "ls", "arguments": {"a": true}}\n</tool_call>'
    assert _read(text) == ([("ls", {"a": True}, "ok_strict")], "", [])
    assert parse_tool_calls(text, TOOLS).calls == parse_tool_calls(text, TOOLS, tolerant=False).calls


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>\n{'name': 'ls', 'arguments': {'a': True}}\n</tool_call>",  # Python-ish JSON
        '<tool_call>\n{"name": "ls", "arguments": {"a": true}}',  # the closing tag never written
        '```json\n{"name": "ls", "arguments": {"a": true}}\n```',  # a fenced bare object
        '{{"name": "ls", "arguments": {"a": true}}}',  # doubled braces
    ],
)
def test_a_call_that_needs_a_tolerance_stays_text(text: str) -> None:
    """Each of these is a call for the tolerant parser (ok_fallback or repaired) and the whole text for the strict."""
    assert [c.name for c in parse_tool_calls(text, TOOLS).calls] == ["ls"]
    assert _read(text) == ([], text, [])


def test_no_call_is_read_from_running_text_or_from_the_reasoning() -> None:
    prose = 'I will call {"name": "ls", "arguments": {"a": true}} now'
    assert [c.bucket for c in parse_tool_calls(prose, TOOLS).rejected] == ["Ambiguous"]
    assert _read(prose) == ([], prose, [])
    thought = '<think><tool_call>{"name": "ls", "arguments": {}}</tool_call></think>done'
    assert [c.name for c in parse_tool_calls(thought, TOOLS).calls] == ["ls"]
    assert _read(thought) == ([], "done", [])
    outcome = parse_tool_calls("done", TOOLS, reasoning='<tool_call>{"name": "ls", "arguments": {}}</tool_call>',
                               tolerant=False)  # fmt: skip
    assert (outcome.calls, outcome.content) == ((), "done")


def test_schema_repair_is_still_the_callers_choice() -> None:
    """A whole call with a key in the wrong case: repaired under bounded repair, refused with repair off."""
    text = '<tool_call>\n{"name": "ls", "arguments": {"A": true}}\n</tool_call>'
    assert _read(text, repair="bounded") == ([("ls", {"a": True}, "repaired")], "", [])
    assert _read(text, repair="none") == ([], "", ["SchemaMismatch"])


def test_a_call_that_cannot_be_decoded_or_was_cut_off_stays_text() -> None:
    broken = '<tool_call>\n{"name": "ls", "arguments": {"a": tru}}\n</tool_call>'
    assert [c.bucket for c in parse_tool_calls(broken, TOOLS).rejected] == ["InvalidJson"]
    assert _read(broken) == ([], broken, [])
    cut = '<tool_call>\n{"name": "ls", "arguments": {"a": '
    assert [c.bucket for c in parse_tool_calls(cut, TOOLS, finish_reason="length").rejected] == ["Truncated"]
    assert _read(cut, finish_reason="length") == ([], cut.strip(), [])
