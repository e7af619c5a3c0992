"""Strict finders for the special-token formats: DeepSeek V3/V3.1 and gpt-oss harmony."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats import deepseek, harmony


def _calls(found: list[RawCall]) -> list[tuple[str | None, Any, str, str]]:
    return [(c.name, c.arguments, c.format, c.stage) for c in found]


V3 = (
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
    '{"city": "Paris"}\n```<｜tool▁call▁end｜>'
    "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_time\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
)


def test_deepseek_v3_two_calls_span_the_outer_tokens() -> None:
    """V3 function<sep>name + fenced JSON; the outer begin/end tokens belong to the first/last call."""
    found = deepseek.find(V3)
    assert _calls(found) == [
        ("get_weather", {"city": "Paris"}, "deepseek_v3", "strict"),
        ("get_time", {}, "deepseek_v3", "strict"),
    ]
    assert (found[0].span[0], found[1].span[1]) == (0, len(V3))


def test_deepseek_v31_call() -> None:
    """V3.1 name<sep>{json}."""
    text = (
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
        '{"city": "Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
    )
    assert _calls(deepseek.find(text)) == [("get_weather", {"city": "Paris"}, "deepseek_v31", "strict")]


def test_deepseek_ascii_spellings() -> None:
    """ASCII bars and underscores spell the same tokens."""
    text = '<|tool_calls_begin|><|tool_call_begin|>get_weather<|tool_sep|>{"city": "Paris"}<|tool_call_end|>'
    assert _calls(deepseek.find(text)) == [("get_weather", {"city": "Paris"}, "deepseek_v31", "strict")]


def test_deepseek_cut_off_is_truncated() -> None:
    """A call with no end token at the end of the text is truncated."""
    found = deepseek.find('<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Par')
    assert [(c.name, c.truncated) for c in found] == [("get_weather", True)]


def test_deepseek_negatives() -> None:
    """Prose about the tokens and a begin token spelled wrong are not calls."""
    assert deepseek.find("DeepSeek uses tool call begin tokens.") == []
    assert deepseek.find("<tool▁call▁begin>get_weather<tool▁sep>{}") == []


def test_harmony_commentary_recipient_after_channel() -> None:
    """commentary to=functions.x <|constrain|>json<|message|>{…}<|call|> is a call."""
    text = (
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
        '<|message|>{"city": "Paris"}<|call|>'
    )
    found = harmony.find(text)
    assert _calls(found) == [("get_weather", {"city": "Paris"}, "harmony", "strict")]
    assert found[0].span == (0, len(text))


def test_harmony_recipient_before_channel_and_on_analysis() -> None:
    """The recipient may precede the channel, and calls on the analysis channel count."""
    text = (
        '<|start|>assistant to=functions.a<|channel|>commentary json<|message|>{"x": 1}<|call|>'
        "<|channel|>analysis to=functions.b<|message|>{}<|call|>"
    )
    assert _calls(harmony.find(text)) == [("a", {"x": 1}, "harmony", "strict"), ("b", {}, "harmony", "strict")]


def test_harmony_cut_off_is_truncated() -> None:
    """A call message with no end token at the end is truncated."""
    found = harmony.find('<|channel|>commentary to=functions.a<|message|>{"x": ')
    assert [(c.name, c.truncated) for c in found] == [("a", True)]


def test_harmony_negatives() -> None:
    """Messages without a recipient, and prose with to=, are not calls."""
    assert harmony.find("<|channel|>final<|message|>Hello to=you<|return|>") == []
    assert harmony.find("send it to=functions.a later") == []


def test_harmony_header_cut_before_the_message_is_truncated() -> None:
    """An output cut right after a call header is a truncated call with no arguments."""
    found = harmony.find("<|channel|>commentary to=functions.get_weather")
    assert [(c.name, c.truncated, c.decode_error) for c in found] == [
        ("get_weather", True, "the message never started")
    ]


def test_deepseek_v31_several_calls_and_one_bad() -> None:
    """Each V3.1 call is decoded on its own; a broken one does not drop the others."""
    text = (
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>a<｜tool▁sep｜>{"x": 1}<｜tool▁call▁end｜>'
        '<｜tool▁call▁begin｜>b<｜tool▁sep｜>{"x": }<｜tool▁call▁end｜>'
        "<｜tool▁call▁begin｜>c<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
    )
    found = deepseek.find(text)
    assert [(c.name, c.arguments, c.decode_error is None) for c in found] == [
        ("a", {"x": 1}, True),
        ("b", None, False),
        ("c", {}, True),
    ]


def _token(words: str) -> re.Pattern[str]:
    return re.compile(r"<[|｜]\s{0,2}" + r"[▁_ ]".join(words.split()) + r"\s{0,2}[|｜]>")


_SEPS = st.sampled_from(["▁", "_", " ", "-"])
_TOKEN_TEXT = st.builds(
    lambda bar1, words, seps, space1, space2, bar2: (
        f"<{bar1}{space1}" + "".join(w + x for w, x in zip(words, [*seps, ""], strict=False)) + f"{space2}{bar2}>"
    ),
    st.sampled_from(["｜", "|", "!"]),
    st.sampled_from(
        [
            ["tool", "calls", "begin"],
            ["tool", "calls", "end"],
            ["tool", "call", "begin"],
            ["tool", "call", "end"],
            ["tool", "sep"],
            ["tool", "cal", "end"],
        ]
    ),
    st.lists(_SEPS, min_size=2, max_size=2),
    st.sampled_from(["", " ", "  ", "   "]),
    st.sampled_from(["", " ", "\n", "   "]),
    st.sampled_from(["｜", "|", "!"]),
)
_TOKEN_PIECES = st.lists(st.one_of(_TOKEN_TEXT, st.sampled_from(["f", '{"a": 1}', "\n", "<", "｜>"])), max_size=12).map(
    "".join
)


@settings(max_examples=400, deadline=None)
@given(_TOKEN_PIECES)
def test_one_pass_finds_each_token_kind_where_its_own_pattern_does(text: str) -> None:
    """The single token pattern finds, per kind, exactly the matches of that kind's own pattern."""
    kinds = ["tool calls begin", "tool calls end", "tool call begin", "tool call end", "tool sep"]
    one_pass: list[list[tuple[int, int]]] = [[] for _ in kinds]
    for m in deepseek._ANY_TOKEN.finditer(text):
        one_pass[(m.lastindex or 1) - 1].append(m.span())
    assert one_pass == [[m.span() for m in _token(kind).finditer(text)] for kind in kinds]


def test_kimi_k2_sections_read_every_call_with_its_name_and_span() -> None:
    """Kimi K2: each call of a section is read (name from functions.NAME:IDX), the section tokens in the spans."""
    from tooldispatch.parsing.formats import kimi

    call_a = '<|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|>'
    call_b = "<|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{}<|tool_call_end|>"
    text = f"Checking. <|tool_calls_section_begin|>{call_a}{call_b}<|tool_calls_section_end|>"
    found = kimi.find(text)
    assert [(c.format, c.name, c.arguments, c.span) for c in found] == [
        ("kimi_k2", "get_weather", {"city": "Paris"}, (10, 10 + len("<|tool_calls_section_begin|>") + len(call_a))),
        ("kimi_k2", "get_time", {}, (len(text) - len(call_b) - len("<|tool_calls_section_end|>"), len(text))),
    ]


def test_kimi_k2_is_not_read_as_deepseek_and_has_its_tool_format_name() -> None:
    """A Kimi K2 section gives its calls under auto and tool_format="kimi_k2", and no DeepSeek rejection."""
    from tooldispatch.parsing.core import parse_tool_calls

    tools = [{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    text = (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
        '{"city": "Oslo"}<|tool_call_end|><|tool_calls_section_end|>'
    )
    for tool_format in ("auto", "kimi_k2", "kimi"):
        outcome = parse_tool_calls(text, tools, tool_format=tool_format)
        assert [(c.name, c.arguments, c.bucket, c.format) for c in outcome.candidates] == [
            ("get_weather", {"city": "Oslo"}, "ok_strict", "kimi_k2")
        ]
        assert outcome.content == ""


_NEVER = 'Never call get_weather[ARGS]{"city": "Paris"} here.'


@pytest.mark.parametrize(
    ("text", "expected", "content"),
    [
        ('[TOOL_CALLS]get_weather[CALL_ID]a1B2c3D4e[ARGS]{"city": "Paris"}', [("get_weather", {"city": "Paris"})], ""),
        ('get_weather[ARGS]{"city": "Lyon"}', [("get_weather", {"city": "Lyon"})], ""),
        ('get_weather[ARGS]{"city": "Nice"} More soon.', [("get_weather", {"city": "Nice"})], "More soon."),
        (
            'get_weather[ARGS]{"city": "Oslo"}[TOOL_CALLS]get_weather[ARGS]{"city": "Rome"}',
            [("get_weather", {"city": "Oslo"}), ("get_weather", {"city": "Rome"})],
            "",
        ),
        (
            'Never call get_weather[ARGS]{"city": "Paris"} here.',
            [],
            'Never call get_weather[ARGS]{"city": "Paris"} here.',
        ),
    ],
)
def test_mistral_args_forms_with_and_without_the_leading_token(text: str, expected: list[Any], content: str) -> None:
    """NAME[CALL_ID]ID[ARGS]{json} and NAME[ARGS]{json} (no [TOOL_CALLS], prose after, joined by [TOOL_CALLS]) for a
    read-only tool."""
    from tooldispatch.parsing.core import parse_tool_calls
    from tooldispatch.toolspec import ToolSpec

    tools = [
        ToolSpec(
            "get_weather", parameters={"type": "object", "properties": {"city": {"type": "string"}}}, repair="bounded"
        )
    ]
    outcome = parse_tool_calls(text, tools)
    assert [(c.name, c.arguments) for c in outcome.calls] == expected
    assert all(c.format == "mistral" for c in outcome.calls)
    assert outcome.content == content
