"""parse_tool_calls: the cascade, buckets, content, reasoning recovery, native calls, ids and stages."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from tooldispatch.errors import ConfigError
from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.policy import ToolPolicy
from tooldispatch.toolspec import ToolSpec, normalize_tools
from tooldispatch.types import ParseOutcome

_DECLARED: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    "days": {"type": "integer"},
                },
                "required": ["city"],
            },
        },
    },
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
]
# The tools these tests read calls for are declared read-only: their calls may stand in running text and
# their names be repaired to a near match (a tool given as a plain dict is side-effecting: test_prose.py).
TOOLS: list[ToolSpec] = list(ToolPolicy.read_only(why="test tools").declare(normalize_tools(_DECLARED).values()))


def _summary(outcome: ParseOutcome) -> list[tuple[str, dict[str, Any], str, str]]:
    return [(c.name, c.arguments, c.bucket, c.format) for c in outcome.calls]


def test_hermes_call_with_content() -> None:
    """A strict hermes call is ok_strict; the surrounding text is the content."""
    out = parse_tool_calls(
        'Let me check.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>', TOOLS
    )
    assert _summary(out) == [("get_weather", {"city": "Paris"}, "ok_strict", "hermes")]
    assert (out.content, out.stage, out.flags) == ("Let me check.", "strict", frozenset())
    assert out.calls[0].id == "call_0"


def test_one_bad_block_keeps_good_ones_with_buckets() -> None:
    """A broken block is an InvalidJson candidate while its neighbours become calls."""
    text = (
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>\n'
        '<tool_call>{"name": "get_weather", "arguments": {"city": }}</tool_call>\n'
        '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>'
    )
    out = parse_tool_calls(text, TOOLS)
    assert _summary(out) == [
        ("get_weather", {"city": "Paris"}, "ok_strict", "hermes"),
        ("get_time", {}, "ok_strict", "hermes"),
    ]
    assert [c.bucket for c in out.candidates] == ["ok_strict", "InvalidJson", "ok_strict"]
    assert [c.id for c in out.calls] == ["call_0", "call_1"]
    assert out.content == ""


def test_lenient_json_is_ok_fallback() -> None:
    """Arguments that need lenient JSON are ok_fallback, stage fallback, with a json repair note."""
    out = parse_tool_calls("<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Paris',}}</tool_call>", TOOLS)
    assert _summary(out) == [("get_weather", {"city": "Paris"}, "ok_fallback", "hermes")]
    assert out.stage == "fallback"
    assert [(r.kind, r.before) for r in out.calls[0].repairs] == [("json", "single_quotes"), ("json", "trailing_comma")]


def test_schema_repair_makes_bucket_repaired() -> None:
    """A misspelled name and a string integer are repaired; bucket repaired, stage repair."""
    out = parse_tool_calls(
        '<tool_call>{"name": "get_wether", "arguments": {"city": "Paris", "days": "3"}}</tool_call>', TOOLS
    )
    assert _summary(out) == [("get_weather", {"city": "Paris", "days": 3}, "repaired", "hermes")]
    assert out.stage == "repair"
    assert out.candidates[0].name == "get_wether"


def test_lossless_level_refuses_a_fuzzy_name() -> None:
    """With repair='lossless' an edit-distance rename is an UnknownName rejection."""
    text = '<tool_call>{"name": "get_wether", "arguments": {"city": "Paris"}}</tool_call>'
    out = parse_tool_calls(text, TOOLS, repair="lossless")
    assert out.calls == ()
    assert [c.bucket for c in out.candidates] == ["UnknownName"]


def test_per_tool_repair_mapping() -> None:
    """A per-tool mapping applies to the resolved tool; other tools stay bounded."""
    text = '<tool_call>{"name": "get_wether", "arguments": {"city": "Paris"}}</tool_call>'
    assert parse_tool_calls(text, TOOLS, repair={"get_weather": "lossless"}).calls == ()
    assert len(parse_tool_calls(text, TOOLS, repair={"get_time": "lossless"}).calls) == 1


def test_unknown_name_and_schema_mismatch() -> None:
    """An undeclared tool is UnknownName; a missing required argument is SchemaMismatch."""
    text = (
        '<tool_call>{"name": "send_email", "arguments": {}}</tool_call>'
        '<tool_call>{"name": "get_weather", "arguments": {"unit": "celsius"}}</tool_call>'
    )
    out = parse_tool_calls(text, TOOLS)
    assert out.calls == ()
    assert [(c.bucket, c.name) for c in out.candidates] == [
        ("UnknownName", "send_email"),
        ("SchemaMismatch", "get_weather"),
    ]
    assert all(c.error for c in out.candidates)


def test_truncated_with_finish_reason_length() -> None:
    """A call cut off at the end with finish_reason=length is Truncated, not InvalidJson."""
    text = 'Checking <tool_call>{"name": "get_weather", "arguments": {"city": "Pa'
    out = parse_tool_calls(text, TOOLS, finish_reason="length")
    assert out.calls == ()
    assert [c.bucket for c in out.candidates] == ["Truncated"]
    assert out.content == "Checking"


def test_unclosed_complete_call_without_length_is_accepted() -> None:
    """A final call whose closing tag is missing but whose JSON is complete is ok_fallback."""
    out = parse_tool_calls('<tool_call>{"name": "get_time", "arguments": {}}', TOOLS, finish_reason="stop")
    assert _summary(out) == [("get_time", {}, "ok_fallback", "hermes")]


def test_unclosed_complete_call_with_length_is_truncated() -> None:
    """The same output cut by finish_reason=length is Truncated."""
    out = parse_tool_calls('<tool_call>{"name": "get_time", "arguments": {}}', TOOLS, finish_reason="length")
    assert [c.bucket for c in out.candidates] == ["Truncated"]


def test_call_inside_reasoning_is_recovered_and_flagged() -> None:
    """With no call outside the reasoning, a call inside it is recovered with in_reasoning."""
    text = '<think>I will call <tool_call>{"name": "get_time", "arguments": {}}</tool_call></think>One moment.'
    out = parse_tool_calls(text, TOOLS)
    assert _summary(out) == [("get_time", {}, "ok_strict", "hermes")]
    assert out.calls[0].flags == frozenset({"in_reasoning"})
    assert out.flags == frozenset({"in_reasoning"})
    assert (out.content, out.reasoning.startswith("I will call")) == ("One moment.", True)


def test_call_outside_reasoning_wins() -> None:
    """When content has a call, calls inside the reasoning are not recovered."""
    text = (
        '<think><tool_call>{"name": "get_time", "arguments": {}}</tool_call></think>'
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    )
    out = parse_tool_calls(text, TOOLS)
    assert _summary(out) == [("get_weather", {"city": "Oslo"}, "ok_strict", "hermes")]
    assert out.flags == frozenset()


def test_reasoning_open() -> None:
    """reasoning_open treats the text before </think> as reasoning."""
    out = parse_tool_calls(
        'thinking</think><tool_call>{"name": "get_time", "arguments": {}}</tool_call>', TOOLS, reasoning_open=True
    )
    assert (out.reasoning, len(out.calls), out.content) == ("thinking", 1, "")


def test_no_call_flag_and_plain_content() -> None:
    """Prose with no call-like span sets no_call and keeps the text as content."""
    out = parse_tool_calls("The weather in Paris is nice.", TOOLS)
    assert (out.calls, out.candidates, out.content, out.stage) == ((), (), "The weather in Paris is nice.", "none")
    assert out.flags == frozenset({"no_call"})


def test_native_calls_with_malformed_arguments() -> None:
    """Native tool_calls keep their ids; malformed argument strings are decoded leniently or rejected."""
    native = [
        {"id": "abc", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"id": "def", "type": "function", "function": {"name": "get_weather", "arguments": "{'city': 'Rome',}"}},
        {"id": "ghi", "type": "function", "function": {"name": "get_time", "arguments": "{not json at all"}},
        {"type": "function", "function": {"name": "get_time", "arguments": ""}},
    ]
    out = parse_tool_calls("", TOOLS, native_calls=native)
    assert [(c.id, c.name, c.arguments, c.bucket, c.format) for c in out.calls] == [
        ("abc", "get_weather", {"city": "Paris"}, "ok_strict", "openai"),
        ("def", "get_weather", {"city": "Rome"}, "ok_fallback", "openai"),
        ("call_2", "get_time", {}, "ok_strict", "openai"),
    ]
    assert [c.bucket for c in out.candidates] == ["ok_strict", "ok_fallback", "InvalidJson", "ok_strict"]
    assert out.calls[0].stage == "native"
    assert out.stage == "fallback"


def test_native_call_also_echoed_in_text_is_not_doubled() -> None:
    """A call the server extracted and left in the text too is counted once; the text span is not content."""
    native = [{"id": "x1", "function": {"name": "get_time", "arguments": "{}"}}]
    out = parse_tool_calls(
        'ok <tool_call>{"name": "get_time", "arguments": {}}</tool_call>', TOOLS, native_calls=native
    )
    assert [(c.id, c.name) for c in out.calls] == [("x1", "get_time")]
    assert out.content == "ok"


def test_named_tool_format_restricts_finders() -> None:
    """tool_format names one format; others are not tried by the strict stage."""
    text = "[TOOL_CALLS]get_time[ARGS]{}"
    assert _summary(parse_tool_calls(text, TOOLS, tool_format="mistral")) == [("get_time", {}, "ok_strict", "mistral")]
    assert [
        c.format for c in parse_tool_calls(text, TOOLS, tool_format="hermes").candidates if c.format == "mistral"
    ] == []


def test_invalid_options_raise_config_error() -> None:
    """An unknown format or repair level is a ConfigError naming the choices."""
    with pytest.raises(ConfigError, match="unknown tool_format 'nope'"):
        parse_tool_calls("x", TOOLS, tool_format="nope")
    with pytest.raises(ConfigError, match="unknown repair level 'max'"):
        parse_tool_calls("x", TOOLS, repair="max")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        ('{"name": "get_weather", "parameters": {"city": "Paris"}}', "llama3_json"),
        ('<|python_start|>[get_weather(city="Paris")]<|python_end|>', "llama4"),
        ('[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]', "mistral"),
        ('[get_weather(city="Paris")]', "pythonic"),
        (
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
            "qwen3_coder",
        ),
        ('<invoke name="get_weather"><parameter name="city">Paris</parameter></invoke>', "xml_invoke"),
        ('```tool_code\nget_weather(city="Paris")\n```', "gemma"),
        ('<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}<｜tool▁call▁end｜>', "deepseek_v31"),
        ('<|channel|>commentary to=functions.get_weather<|message|>{"city": "Paris"}<|call|>', "harmony"),
        ("<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>", "glm"),
    ],
)
def test_auto_finds_every_format(text: str, fmt: str) -> None:
    """tool_format='auto' recognises each documented format and leaves no content behind."""
    out = parse_tool_calls(text, TOOLS)
    assert _summary(out) == [("get_weather", {"city": "Paris"}, "ok_strict", fmt)]
    assert out.content == ""


def test_harmony_full_output_splits_reasoning_and_call() -> None:
    """A gpt-oss output gives reasoning from analysis and the call from commentary."""
    text = (
        "<|channel|>analysis<|message|>User wants weather.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
        '<|message|>{"city": "Paris"}<|call|>'
    )
    out = parse_tool_calls(text, TOOLS)
    assert _summary(out) == [("get_weather", {"city": "Paris"}, "ok_strict", "harmony")]
    assert (out.reasoning, out.content) == ("User wants weather.", "")


def test_content_excludes_calls_and_reasoning() -> None:
    """Content is the text minus call spans and reasoning, stripped."""
    text = '<think>plan</think>Before.\n<tool_call>{"name": "get_time", "arguments": {}}</tool_call>\nAfter.'
    out = parse_tool_calls(text, TOOLS)
    assert out.content == "Before.\n\nAfter."


def test_pathological_inputs_do_not_raise() -> None:
    """Deep brackets inside call markers give no call and raise nothing."""
    for text in ("[" * 10000, "<tool_call>" + "{" * 10000, "[f(a=" + "[" * 10000, "<|python_tag|>" + "{" * 10000):
        out = parse_tool_calls(text, TOOLS)
        assert out.calls == ()


def test_echoed_tool_schema_is_not_a_call() -> None:
    """A tool declaration copied from the prompt is content, not a call."""
    echo = '{"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}'
    out = parse_tool_calls(echo, TOOLS)
    assert (out.calls, out.candidates, out.flags) == ((), (), frozenset({"no_call"}))


def test_prompt_placeholder_is_not_a_call() -> None:
    """The format example from a hermes prompt is not a candidate."""
    text = '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    out = parse_tool_calls(text, TOOLS)
    assert (out.calls, out.candidates) == ((), ())


def test_rejected_call_outside_reasoning_blocks_recovery() -> None:
    """A rejected candidate outside the reasoning still counts as the model's call: reasoning is not searched."""
    text = (
        '<think><tool_call>{"name": "get_time", "arguments": {}}</tool_call></think>'
        '<tool_call>{"name": "get_time", "arguments": {"x": }}</tool_call>'
    )
    out = parse_tool_calls(text, TOOLS)
    assert out.calls == ()
    assert [(c.bucket, c.flags) for c in out.candidates] == [("InvalidJson", frozenset())]


def test_ids_skip_native_ids() -> None:
    """Assigned ids never collide with a native id."""
    native = [{"id": "call_1", "function": {"name": "get_time", "arguments": "{}"}}]
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    out = parse_tool_calls(text, TOOLS, native_calls=native)
    assert [(c.id, c.name) for c in out.calls] == [("call_1", "get_time"), ("call_2", "get_weather")]


def test_one_missing_final_closer_is_tolerated() -> None:
    """Without finish_reason=length, a call missing only its last closer is accepted as ok_fallback."""
    out = parse_tool_calls('{"name": "get_weather", "parameters": {"city": "Kyiv"}', TOOLS)
    assert _summary(out) == [("get_weather", {"city": "Kyiv"}, "ok_fallback", "llama3_json")]


def test_cut_inside_a_string_is_truncated_without_finish_reason() -> None:
    """A call cut inside a string value is Truncated even when the finish reason is unknown."""
    out = parse_tool_calls('<tool_call>{"name": "get_weather", "arguments": {"city": "Pa', TOOLS)
    assert [c.bucket for c in out.candidates] == ["Truncated"]


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "get_weather", "parameters": {"city": ',
        '{"name": "get_weather", "parameters": {"city": "Kyiv",',
        '{"name": "get_weather", "parameters": {"city": "Kyiv", "units"',
    ],
)
def test_a_call_cut_after_a_key_or_comma_is_truncated_without_finish_reason(text: str) -> None:
    """More than the last closer is missing when the text ends after a key, a colon or a comma."""
    out = parse_tool_calls(text, TOOLS)
    assert [c.bucket for c in out.candidates] == ["Truncated"]


def test_an_xml_call_cut_inside_its_next_parameter_is_truncated_without_finish_reason() -> None:
    """Every parameter before the cut is complete, yet a half-written one follows: the call is Truncated."""
    text = "<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=un"
    out = parse_tool_calls(text, TOOLS)
    assert [(c.bucket, c.arguments) for c in out.candidates] == [("Truncated", {"city": "Oslo"})]
    assert out.calls == ()


def test_native_arguments_cut_after_a_colon_are_truncated() -> None:
    """Native arguments that end after a key's colon (and a space) were cut off, not malformed."""
    native = [{"id": "c1", "function": {"name": "get_weather", "arguments": '{"city": '}}]
    out = parse_tool_calls("", TOOLS, native_calls=native)
    assert [(c.bucket, c.arguments) for c in out.candidates] == [("Truncated", {})]


def test_one_missing_closer_with_length_is_truncated() -> None:
    """With finish_reason=length even one missing closer means the call was cut off."""
    out = parse_tool_calls('{"name": "get_weather", "parameters": {"city": "Kyiv"}', TOOLS, finish_reason="length")
    assert [c.bucket for c in out.candidates] == ["Truncated"]


def test_native_calls_as_sdk_objects() -> None:
    """Native calls given as objects with attributes (the openai SDK's shape) are read the same way."""
    from types import SimpleNamespace

    native = [SimpleNamespace(id="s1", function=SimpleNamespace(name="get_weather", arguments='{"city": "Lima"}'))]
    out = parse_tool_calls("", TOOLS, native_calls=native)
    assert [(c.id, c.name, c.arguments, c.bucket) for c in out.calls] == [
        ("s1", "get_weather", {"city": "Lima"}, "ok_strict")
    ]


def test_native_arguments_encoded_twice() -> None:
    """An arguments string that holds a JSON string of the object is decoded twice and is ok_fallback."""
    native = [{"id": "n1", "function": {"name": "get_weather", "arguments": '"{\\"city\\": \\"Lima\\"}"'}}]
    out = parse_tool_calls("", TOOLS, native_calls=native)
    assert [(c.name, c.arguments, c.bucket) for c in out.calls] == [("get_weather", {"city": "Lima"}, "ok_fallback")]


def test_incomplete_markers_are_not_calls() -> None:
    """Half-written markers of every family select nothing and leave the text as content."""
    for text in (
        "<function=get_weather <parameter=city>Paris",
        "<｜tool▁call▁begin get_weather",
        "<|python_start [get_weather(city='Paris')]",
        "[TOOL_CALLS get_weather",
        "<|channel>commentary to=functions.get_weather<|message|>{}",
    ):
        out = parse_tool_calls(text, TOOLS)
        assert [c.format for c in out.candidates if c.stage == "strict"] == [], text


def test_format_aliases() -> None:
    """vLLM parser names and manifest prompt formats select the matching finder."""
    text = "<｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
    assert _summary(parse_tool_calls(text, TOOLS, tool_format="deepseek_v31")) == [
        ("get_time", {}, "ok_strict", "deepseek_v31")
    ]
    text = "<|channel|>commentary to=functions.get_time<|message|>{}<|call|>"
    assert _summary(parse_tool_calls(text, TOOLS, tool_format="openai")) == [("get_time", {}, "ok_strict", "harmony")]


def test_unclosed_brace_before_a_hermes_block_does_not_hide_it() -> None:
    """A stray ``{`` before a valid hermes block leaves the block a strict call, not a cut-off Llama object."""
    out = parse_tool_calls('{<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>', TOOLS)
    assert _summary(out) == [("get_weather", {"city": "Paris"}, "ok_strict", "hermes")]


def test_misspelled_wrapper_tag_is_a_wrapper_repair() -> None:
    """A misspelled, unclosed wrapper tag is noted as wrapper repairs, never as a JSON repair."""
    out = parse_tool_calls('<toolcall>\n{"name": "get_weather", "arguments": {"city": "Paris"}}', TOOLS)
    assert _summary(out) == [("get_weather", {"city": "Paris"}, "ok_fallback", "tag:json")]
    repairs = [(r.kind, r.before) for r in out.calls[0].repairs]
    assert repairs == [("wrapper", "wrapper_tag"), ("wrapper", "unclosed_tag")]


def test_unclosed_gemma_fence_before_a_hermes_block_does_not_hide_it() -> None:
    """Prose that opens a tool_code fence right before a valid hermes block still yields the hermes call."""
    block = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    out = parse_tool_calls("```tool_code" + block, TOOLS)
    assert _summary(out) == [("get_weather", {"city": "Oslo"}, "ok_strict", "hermes")]
    assert out.content == "```tool_code"


@pytest.mark.parametrize("prefix", ["[A(", "[A(x=1, ", '[A("', "[get_time(x"])
def test_unreadable_cut_off_python_list_does_not_hide_a_hermes_block(prefix: str) -> None:
    """A ``[f(`` list never closed yields to the valid hermes block after it; the list start is content."""
    block = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    out = parse_tool_calls(prefix + block, TOOLS)
    assert _summary(out) == [("get_weather", {"city": "Oslo"}, "ok_strict", "hermes")]
    assert [(c.format, c.bucket) for c in out.candidates] == [("hermes", "ok_strict")]
    assert out.content == prefix.strip()


def test_cut_off_python_list_alone_stays_truncated() -> None:
    """With no readable call inside it, a list cut off at the end is one Truncated candidate."""
    out = parse_tool_calls('[get_weather(city="Par', TOOLS, finish_reason="length")
    assert out.calls == ()
    assert [(c.format, c.bucket, c.name) for c in out.candidates] == [("pythonic", "Truncated", "get_weather")]


def test_unreadable_cut_off_python_list_does_not_hide_a_call_the_fallback_reads() -> None:
    """A block the strict reader leaves to the fallback (a value that looks like a placeholder) is found too."""
    block = '<tool_call>{"name": "get_weather", "arguments": {"city": "<function-name>", "days": 2}}</tool_call>'
    alone = parse_tool_calls(block, TOOLS)
    out = parse_tool_calls("[A(" + block, TOOLS)
    assert _summary(alone) == [("get_weather", {"city": "<function-name>", "days": 2}, "ok_fallback", "tag:json")]
    assert _summary(out) == _summary(alone)
    assert [(c.format, c.bucket, c.span) for c in out.candidates] == [("tag:json", "ok_fallback", (3, 3 + len(block)))]
    assert out.content == "[A("


@pytest.mark.parametrize("value", ["<|channel|>", "</tool_call>", "<|channel|>analysis</tool_call>"])
def test_markers_inside_a_hermes_string_value_are_text(value: str) -> None:
    """A harmony header or a closing tag inside a JSON string of a hermes call is part of the value."""
    block = '<tool_call>{"name": "get_weather", "arguments": {"city": "' + value + '"}}</tool_call>'
    out = parse_tool_calls(f"Sure. {block}", TOOLS)
    assert _summary(out) == [("get_weather", {"city": value}, "ok_strict", "hermes")]
    assert [c.span for c in out.candidates] == [(6, 6 + len(block))]
    assert (out.content, out.reasoning) == ("Sure.", "")


@pytest.mark.parametrize(
    ("text", "bucket", "fmt"),
    [
        ('[get_weather(city="Par\\<is")]', "ok_strict", "pythonic"),
        ('Calling get_weather(city="Par\\<is")', "ok_fallback", "python_call"),
    ],
)
def test_python_call_with_an_invalid_escape_reads_under_any_warning_filter(text: str, bucket: str, fmt: str) -> None:
    """Python keeps an unknown escape as written; the compiler's warning about it neither shows nor rejects the call."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = parse_tool_calls(text, TOOLS)
    assert _summary(out) == [("get_weather", {"city": "Par\\<is"}, bucket, fmt)]


def test_reasoning_the_backend_split_is_taken_as_given() -> None:
    """reasoning=: a call only in it is recovered (in_reasoning); a call in the content wins; it is the outcome's."""
    from tooldispatch.backends.base import NativeCall

    tools = [{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    block = '<tool_call>{"name": "get_weather", "arguments": {"city": "%s"}}</tool_call>'
    inside = parse_tool_calls("Let me check.", tools, reasoning=block % "Oslo")
    assert [(c.name, c.arguments, sorted(c.flags)) for c in inside.calls] == [
        ("get_weather", {"city": "Oslo"}, ["in_reasoning"])
    ]
    assert (inside.content, inside.reasoning) == ("Let me check.", block % "Oslo")
    outside = parse_tool_calls(block % "Rome", tools, reasoning=f"Maybe {block % 'Oslo'}")
    assert [(c.name, c.arguments, c.flags) for c in outside.calls] == [("get_weather", {"city": "Rome"}, frozenset())]
    assert outside.reasoning == f"Maybe {block % 'Oslo'}"
    joined = parse_tool_calls(f"<think>{block % 'Oslo'}</think>Let me check.", tools)
    assert [(c.name, c.arguments, c.flags) for c in joined.calls] == [
        (c.name, c.arguments, c.flags) for c in inside.calls
    ]
    native = parse_tool_calls(
        "", tools, reasoning="thinking", native_calls=[NativeCall("n1", "get_weather", '{"city": "Lima"}')]
    )
    assert [(c.id, c.arguments) for c in native.calls] == [("n1", {"city": "Lima"})]
