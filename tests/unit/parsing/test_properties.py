"""Properties of parse_tool_calls that must hold for any input: no exception, no hang, no invented call."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.parsing.earned import prose_refuses
from tooldispatch.policy import ToolPolicy
from tooldispatch.toolspec import normalize_tools
from tooldispatch.types import ParseOutcome

# The declared names hold at least three of the letters q, v, w, x, z, which neither the generated prose
# nor the format fragments below use: any generated text is then at least three edits away from every
# declared name, beyond the bounded repair's reach, so a call in it would be invented.
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "quote_fx_vix",
            "parameters": {
                "type": "object",
                "properties": {"symbol": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["symbol"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "wavez_sync",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    },
]
NAMES = ("quote_fx_vix", "wavez_sync")
READ_ONLY = list(ToolPolicy.read_only(why="test").declare(normalize_tools(TOOLS).values()))
FORBIDDEN = "qvwxzQVWXZ"

FRAGMENTS = [
    "<tool_call>",
    "</tool_call>",
    '{"name": ',
    '"arguments": ',
    '"parameters": ',
    "[TOOL_CALLS]",
    "<|python_tag|>",
    "<|python_start|>",
    "<function=",
    "<parameter=",
    "</function>",
    '<invoke name="',
    "to=functions.",
    "<|channel|>commentary",
    "```json\n",
    "```",
    "<think>",
    "</think>",
    "[THINK]",
    "<arg_key>",
    "<arg_value>",
    "</arg_key>",
    "</arg_value>",
    "<｜DSML｜function_calls>",
    '<｜DSML｜invoke name="',
    '<｜DSML｜parameter name="',
    '" string="true">',
    "</｜DSML｜parameter>",
    "</｜DSML｜invoke>",
    "<seed:tool_call>",
    "</seed:tool_call>",
    "<seed:think>",
    "</seed:think>",
    "tool_name",
    "{...}",
    "null",
    "true",
    "None",
    '"symbol": "ABC"',
    "{",
    "}",
    "[",
    "]",
    "(",
    ")",
    ":",
    ",",
    "=",
    '"',
    "'",
    "\n",
]

prose_chars = st.characters(blacklist_characters=FORBIDDEN, blacklist_categories=("Cs",))
texts_without_names = st.lists(st.sampled_from(FRAGMENTS) | st.text(prose_chars, max_size=12), max_size=40).map("".join)
options = st.fixed_dictionaries(
    {
        "finish_reason": st.sampled_from([None, "stop", "length", "tool_calls"]),
        "reasoning_open": st.booleans(),
        "tool_format": st.sampled_from(["auto", "hermes", "mistral", "pythonic", "glm", "deepseek_v32", "seed_oss"]),
        "tolerant": st.booleans(),
    }
)


def _parse(text: str, **kwargs: Any) -> ParseOutcome:
    outcome = parse_tool_calls(text, TOOLS, **kwargs)
    assert isinstance(outcome, ParseOutcome)
    return outcome


@settings(max_examples=200, deadline=None)
@given(text=st.text(), opts=options)
def test_arbitrary_text_never_raises(text: str, opts: dict[str, Any]) -> None:
    """Any text, with any options, gives an outcome whose calls all name declared tools."""
    outcome = _parse(text, **opts)
    assert {c.name for c in outcome.calls} <= set(NAMES)


@settings(max_examples=200, deadline=None)
@given(text=texts_without_names, opts=options)
def test_text_without_a_declared_name_yields_no_call(text: str, opts: dict[str, Any]) -> None:
    """Format markers, JSON and prose with no declared (or boundedly near) tool name never become a call."""
    assume(not any(name in text for name in NAMES))
    assert _parse(text, **opts).calls == ()


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(chunk=st.lists(st.sampled_from([*FRAGMENTS, "quote_fx_vix", "x"]), min_size=1, max_size=6).map("".join))
@pytest.mark.timeout(120)
def test_one_megabyte_input_returns(chunk: str) -> None:
    """A 1 MB output made of repeated call-like fragments is parsed without raising, in bounded time."""
    text = (chunk * (1_000_000 // len(chunk) + 1))[:1_000_000]
    _parse(text)


@settings(max_examples=12, deadline=None)
@given(
    openers=st.sampled_from(["[", "{", "[{", '{"a": [', "(", "<tool_call>{"]),
    closed=st.booleans(),
    prefix=st.sampled_from(
        ["", "<tool_call>", '{"name": "quote_fx_vix", "arguments": ', "[TOOL_CALLS]", "quote_fx_vix("]
    ),
)
@pytest.mark.timeout(120)
def test_ten_thousand_deep_brackets_return(openers: str, closed: bool, prefix: str) -> None:
    """10,000-deep nesting, closed or not, after a call prefix or not, is parsed without raising."""
    depth = 10_000 // len(openers) + 1
    body = openers * depth
    if closed:
        closers = {"[": "]", "{": "}", "(": ")"}
        body += "".join(closers[c] for c in reversed(body) if c in closers)
    outcome = _parse(prefix + body)
    assert outcome.calls == ()


@settings(max_examples=200, deadline=None)
@given(
    before=st.text(st.characters(blacklist_characters="<>", blacklist_categories=("Cs",)), max_size=200),
    after=st.text(st.characters(blacklist_characters="<>", blacklist_categories=("Cs",)), max_size=200),
    symbol=st.text(st.characters(blacklist_categories=("Cs",)), max_size=20),
    days=st.integers(min_value=-(2**40), max_value=2**40),
)
def test_hermes_call_in_prose_is_found(before: str, after: str, symbol: str, days: int) -> None:
    """A valid hermes call to a read-only tool between any two pieces of prose (without angle brackets) is always
    recovered, unless that prose quotes, negates, supposes or asks it (then it is content: ``parsing.earned``)."""
    arguments = {"symbol": symbol, "days": days}
    block = "<tool_call>" + json.dumps({"name": "quote_fx_vix", "arguments": arguments}) + "</tool_call>"
    text = before + block + after
    assume(not prose_refuses(text, len(before), len(before) + len(block)))
    outcome = parse_tool_calls(text, READ_ONLY)
    assert ("quote_fx_vix", arguments) in [(c.name, c.arguments) for c in outcome.calls]


names_and_fragments = st.lists(
    st.sampled_from([*FRAGMENTS, *NAMES, "quote_fx_vi", '"symbol": "X"}', "(symbol='A')", ".", "?", "。", " "])
    | st.text(prose_chars, max_size=12),
    max_size=40,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=names_and_fragments)
def test_an_undeclared_tool_never_gets_a_call_its_read_only_declaration_would_not(text: str) -> None:
    """Undeclared (side-effecting) tools give a sub-list of the calls the same tools declared read-only give."""
    undeclared = [(c.name, c.arguments) for c in _parse(text).calls]
    declared = [(c.name, c.arguments) for c in parse_tool_calls(text, READ_ONLY).calls]
    rest = iter(declared)
    assert all(call in rest for call in undeclared), (undeclared, declared)


@settings(max_examples=300, deadline=None)
@given(text=names_and_fragments, opts=options)
def test_the_strict_reading_takes_only_calls_written_whole_and_valid(text: str, opts: dict[str, Any]) -> None:
    """tolerant=False with repair off: every call was read by a strict format as written, outside the reasoning,
    valid with no repair or tolerance; and the tolerant reading of the same text never has fewer calls."""
    strict = _parse(text, **{**opts, "tolerant": False}, repair="none")
    assert all(c.bucket == "ok_strict" and c.stage == "strict" and c.repairs == () for c in strict.calls)
    assert all("in_reasoning" not in c.flags for c in strict.calls)
    tolerant = _parse(text, **{**opts, "tolerant": True}, repair="none")
    assert len(tolerant.calls) >= len(strict.calls), (strict.calls, tolerant.calls)
