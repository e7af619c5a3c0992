"""Native calls: the text a candidate shows for a call a server extracted."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldispatch.parsing.native import _raw_text, read_native_calls


@settings(max_examples=300, deadline=None)
@given(
    st.one_of(st.none(), st.text(max_size=12)),
    st.one_of(st.text(max_size=30), st.dictionaries(st.text(max_size=3), st.integers())),
)
def test_the_shown_text_is_what_json_dumps_writes(name: str | None, arguments: Any) -> None:
    """Strings are quoted by json's own encoder, so the text equals json.dumps of the call."""
    assert _raw_text(name, arguments) == json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)


def test_a_native_call_keeps_its_id_and_shows_its_arguments_as_sent() -> None:
    """The id and the text as the server sent it come through with the decoded arguments."""
    [(call, ident)] = read_native_calls([{"id": "c7", "function": {"name": "f", "arguments": '{"a": "\\u00e9"}'}}])
    assert (ident, call.name, call.arguments, call.raw) == (
        "c7",
        "f",
        {"a": "é"},
        '{"name": "f", "arguments": "{\\"a\\": \\"\\\\u00e9\\"}"}',
    )


@pytest.mark.parametrize(
    "arguments",
    [
        'json\n{"city": "Paris"}',
        '```json\n{"city": "Paris"}\n```',
        '```\n{"city": "Paris"}\n```',
        '```json\n{"city": "Paris"}',
    ],
)
def test_native_arguments_with_fence_residue_are_read_with_the_fence_tolerance(arguments: str) -> None:
    """A server's arguments string holding a json fence, or its json tag alone, reads as the object inside it."""
    from tooldispatch.parsing.core import parse_tool_calls

    tools = [{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    native = [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}]
    outcome = parse_tool_calls("", tools, native_calls=native)
    assert [(c.name, c.arguments, c.bucket, c.id, [r.before for r in c.repairs]) for c in outcome.calls] == [
        ("get_weather", {"city": "Paris"}, "ok_fallback", "c1", ["fence"])
    ]


@pytest.mark.parametrize(
    ("arguments", "path"),
    [
        ('{"path": C:\\Users\\me\\a.txt}', "C:\\Users\\me\\a.txt"),
        ('{"path": C:\\Program Files\\app\\x.ini, "mode": "r"}', "C:\\Program Files\\app\\x.ini"),
        ('{"path": \\\\server\\share\\a.txt }', "\\\\server\\share\\a.txt"),
    ],
)
def test_an_unquoted_windows_path_value_is_quoted_with_its_tolerance(arguments: str, path: str) -> None:
    """A native arguments string with a Windows path written without quotes reads as that exact path."""
    from tooldispatch.parsing.core import parse_tool_calls

    props = {"path": {"type": "string"}, "mode": {"type": "string"}}
    tools = [{"name": "read_file", "parameters": {"type": "object", "properties": props}}]
    native = [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": arguments}}]
    (call,) = parse_tool_calls("", tools, native_calls=native).calls
    assert (call.arguments["path"], call.bucket, [r.before for r in call.repairs][:1]) == (
        path,
        "ok_fallback",
        ["unquoted_path"],
    )


def test_unquoted_text_that_is_no_path_stays_unreadable() -> None:
    """Only a drive or share path is quoted: other unquoted words keep the arguments invalid."""
    [(call, _)] = read_native_calls([{"function": {"name": "f", "arguments": '{"path": some\\thing}'}}])
    assert (call.arguments, call.decode_error is not None) == (None, True)
