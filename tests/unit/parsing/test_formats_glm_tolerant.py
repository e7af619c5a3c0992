"""GLM calls with a missing pair tag, the name glued to the first key, or no <tool_call> wrapper."""

from __future__ import annotations

from typing import Any

import pytest

from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.parsing.formats import glm

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "mode": {"type": "string"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        },
    },
]


def _calls(text: str) -> list[tuple[str, dict[str, Any], str]]:
    return [(c.name, c.arguments, c.bucket) for c in parse_tool_calls(text, TOOLS).calls]


@pytest.mark.parametrize(
    "text",
    [
        # <arg_value> opener missing
        "<tool_call>write_file\n<arg_key>path</arg_key>\na.txt</arg_value>\n<arg_key>mode</arg_key>\n"
        "<arg_value>w</arg_value>\n</tool_call>",
        # </arg_value> closer missing
        "<tool_call>write_file\n<arg_key>path</arg_key>\n<arg_value>a.txt\n<arg_key>mode</arg_key>\n"
        "<arg_value>w</arg_value>\n</tool_call>",
        # </arg_key> closer missing
        "<tool_call>write_file\n<arg_key>path<arg_value>a.txt</arg_value>\n<arg_key>mode</arg_key>\n"
        "<arg_value>w</arg_value>\n</tool_call>",
        # <arg_key> opener missing on the second pair
        "<tool_call>write_file\n<arg_key>path</arg_key>\n<arg_value>a.txt</arg_value>\nmode</arg_key>\n"
        "<arg_value>w</arg_value>\n</tool_call>",
        # <arg_key> opener missing on the first pair, the name on its own line
        "<tool_call>write_file\npath</arg_key>\n<arg_value>a.txt</arg_value>\n<arg_key>mode</arg_key>\n"
        "<arg_value>w</arg_value>\n</tool_call>",
        # the name glued to the first key
        "<tool_call>write_filepath</arg_key><arg_value>a.txt</arg_value><arg_key>mode</arg_key>"
        "<arg_value>w</arg_value></tool_call>",
        # no <tool_call> wrapper
        "write_file\n<arg_key>path</arg_key>\n<arg_value>a.txt</arg_value>\n<arg_key>mode</arg_key>\n"
        "<arg_value>w</arg_value>",
        # no opening wrapper, the closing one kept
        "write_file<arg_key>path</arg_key><arg_value>a.txt</arg_value><arg_key>mode</arg_key>"
        "<arg_value>w</arg_value></tool_call>",
    ],
)
def test_a_missing_tag_is_tolerated_and_noted(text: str) -> None:
    """Each malformed GLM call still reads as write_file(path=a.txt, mode=w), an ok_fallback call."""
    assert _calls(text) == [("write_file", {"path": "a.txt", "mode": "w"}, "ok_fallback")]
    (candidate,) = parse_tool_calls(text, TOOLS).candidates
    assert ("wrapper", "unclosed_tag") in [(r.kind, r.before) for r in candidate.repairs]


def test_a_glued_name_splits_at_the_longest_declared_name() -> None:
    """write and write_file are both declared: write_filepath is write_file + path, not write + filepath."""
    found = glm.find("<tool_call>write_filepath</arg_key><arg_value>a.txt</arg_value></tool_call>")
    assert [(c.name, c.arguments, c.lenient) for c in found] == [
        ("write_filepath", {"": "a.txt"}, ("glued_name", "unclosed_tag"))
    ]
    assert _calls("<tool_call>writetext</arg_key><arg_value>hi</arg_value></tool_call>") == [
        ("write", {"text": "hi"}, "ok_fallback")
    ]


def test_a_glued_name_that_starts_with_no_declared_name_is_unknown() -> None:
    """No declared name begins the glued head: the candidate is rejected, not guessed."""
    out = parse_tool_calls("<tool_call>readpath</arg_key><arg_value>a.txt</arg_value></tool_call>", TOOLS)
    assert (out.calls, [c.bucket for c in out.candidates]) == ((), ["UnknownName"])


def test_well_formed_glm_is_still_strict() -> None:
    """The documented form with every tag is ok_strict and notes nothing."""
    text = "<tool_call>write_file\n<arg_key>path</arg_key>\n<arg_value>a.txt</arg_value>\n</tool_call>"
    assert _calls(text) == [("write_file", {"path": "a.txt"}, "ok_strict")]


def test_an_unwrapped_call_cut_off_is_truncated() -> None:
    """An unwrapped run of pairs that ends inside a value was cut off."""
    out = parse_tool_calls("write_file\n<arg_key>path</arg_key>\n<arg_value>a.t", TOOLS, finish_reason="length")
    assert (out.calls, [(c.bucket, c.name) for c in out.candidates]) == ((), [("Truncated", "write_file")])


@pytest.mark.parametrize(
    "text",
    [
        "GLM writes its keys in <arg_key> tags and its values in <arg_value> tags.",
        "Use the tags like this: name <arg_key>k</arg_key> then the value.",
        "Never run write_file\n<arg_key>path</arg_key>\n<arg_value>/etc/passwd</arg_value> on this host.",
    ],
)
def test_prose_about_the_tags_is_no_call(text: str) -> None:
    """Tags mentioned in prose, a name not at a line start, and a negated unwrapped call are no calls."""
    assert parse_tool_calls(text, TOOLS).calls == ()


def test_an_unwrapped_call_in_the_middle_of_prose_is_ambiguous() -> None:
    """With no wrapper and prose on both sides, the call is kept as an Ambiguous candidate."""
    text = "Sure.\nwrite_file\n<arg_key>path</arg_key>\n<arg_value>a.txt</arg_value>\nThen it ran. It was fine."
    out = parse_tool_calls(text, TOOLS)
    assert (out.calls, [c.bucket for c in out.candidates]) == ((), ["Ambiguous"])
