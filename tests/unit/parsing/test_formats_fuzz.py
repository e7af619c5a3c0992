"""Every strict finder, and the whole cascade, survive marker-rich random text without raising."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.parsing.formats import FORMATS
from tooldispatch.parsing.reasoning import split_reasoning

_PIECES = [
    "<tool_call>", "</tool_call>", "<function=", "<parameter=", "</parameter>", "</function>", "<invoke name=",
    "<parameter name=", "</invoke>", "<minimax:tool_call>", "[TOOL_CALLS]", "[ARGS]", "[CALL_ID]",
    "<|python_tag|>", "<|python_start|>", "<|python_end|>", "```tool_code\n", "```tool_call\n", "```",
    "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<|tool_call_begin|>",
    "<|start|>assistant", "<|channel|>", "analysis", "commentary", "final", " to=functions.", "<|constrain|>json",
    "<|message|>", "<|call|>", "<|end|>", "<think>", "</think>", "[THINK]", "[/THINK]", "<arg_key>", "</arg_key>",
    "<arg_value>", "</arg_value>", '{"name": "f", "arguments": ', '{"name": "f", "parameters": ', "{", "}", "[", "]",
    "(", ")", '"', "'", ",", ";", ":", "\n", " ", "\\", "f", "get_weather", "city", "=", "1", "null", "true",
]  # fmt: skip
_TEXT = st.lists(st.sampled_from(_PIECES), max_size=40).map("".join)
_TOOLS = [{"name": "f", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
_FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_FAST
@given(_TEXT)
def test_finders_never_raise_and_spans_are_in_range(text: str) -> None:
    """Each finder returns calls whose spans lie inside the text and match their raw text."""
    for fmt in FORMATS.values():
        for call in fmt.find(text):
            start, end = call.span
            assert 0 <= start <= end <= len(text)
            assert call.raw == text[start:end]


@_FAST
@given(_TEXT, st.booleans(), st.sampled_from([None, "length", "stop"]))
def test_cascade_never_raises_and_calls_are_declared(text: str, reasoning_open: bool, finish: str | None) -> None:
    """parse_tool_calls never raises; every accepted call names a declared tool with an object of arguments."""
    out = parse_tool_calls(text, _TOOLS, reasoning_open=reasoning_open, finish_reason=finish)
    assert all(c.name == "f" and isinstance(c.arguments, dict) for c in out.calls)
    assert len(out.calls) == sum(1 for c in out.candidates if c.accepted)


@_FAST
@given(_TEXT, st.booleans())
def test_reasoning_segments_cover_the_text(text: str, reasoning_open: bool) -> None:
    """The reasoning split's segments are ordered, contiguous and cover the whole text."""
    split = split_reasoning(text, reasoning_open=reasoning_open)
    pos = 0
    for start, end, _ in split.segments:
        assert start == pos and end > start
        pos = end
    assert pos == len(text)
