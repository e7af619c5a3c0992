"""DeepSeek V3.2 DSML, Seed-OSS and harmony with the recipient first: finders and the whole parse."""

from __future__ import annotations

from typing import Any

import pytest

from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.parsing.finders import select_formats
from tooldispatch.parsing.formats import dsml, harmony, seed_oss, xml_invoke

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "days": {"type": "integer"},
                    "hours": {"type": "array", "items": {"type": "integer"}},
                },
                "required": ["city"],
            },
        },
    },
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
]

DSML_XML = (
    "<｜DSML｜function_calls>\n"
    '<｜DSML｜invoke name="get_weather">\n'
    '<｜DSML｜parameter name="city" string="true">San Francisco</｜DSML｜parameter>\n'
    '<｜DSML｜parameter name="days" string="false">3</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n"
    '<｜DSML｜invoke name="get_time">\n'
    "</｜DSML｜invoke>\n"
    "</｜DSML｜function_calls>"
)
DSML_JSON = (
    '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n{"city": "Paris", "days": 2}\n'
    "</｜DSML｜invoke>\n</｜DSML｜function_calls>"
)


def _calls(text: str, **options: Any) -> list[tuple[str, dict[str, Any], str, str]]:
    return [(c.name, c.arguments, c.bucket, c.format) for c in parse_tool_calls(text, TOOLS, **options).calls]


def test_dsml_parameters_string_true_is_text_and_false_is_json() -> None:
    """string="true" keeps the text; string="false" is JSON; the wrapper belongs to the calls' spans."""
    found = dsml.find(DSML_XML)
    assert [(c.name, c.arguments, c.format, c.stage) for c in found] == [
        ("get_weather", {"city": "San Francisco", "days": 3}, "deepseek_v32", "strict"),
        ("get_time", {}, "deepseek_v32", "strict"),
    ]
    assert (found[0].span[0], found[1].span[1]) == (0, len(DSML_XML))


def test_dsml_whole_parse_in_auto_and_by_name() -> None:
    """Both DSML forms parse as ok_strict calls in auto, under deepseek_v32 and its alias dsml."""
    expected = [
        ("get_weather", {"city": "San Francisco", "days": 3}, "ok_strict", "deepseek_v32"),
        ("get_time", {}, "ok_strict", "deepseek_v32"),
    ]
    assert _calls(DSML_XML) == expected
    assert _calls(DSML_XML, tool_format="deepseek_v32") == expected
    assert _calls(DSML_XML, tool_format="dsml") == expected
    assert _calls(DSML_JSON) == [("get_weather", {"city": "Paris", "days": 2}, "ok_strict", "deepseek_v32")]


def test_dsml_string_value_keeps_its_exact_text_and_json_arrays_decode() -> None:
    """A string="true" value keeps inner and trailing newlines; a string="false" array is decoded."""
    text = (
        '<｜DSML｜function_calls><｜DSML｜invoke name="get_weather">'
        '<｜DSML｜parameter name="city" string="true">Paris\n</｜DSML｜parameter>'
        '<｜DSML｜parameter name="hours" string="false">[9, 12]</｜DSML｜parameter>'
        "</｜DSML｜invoke></｜DSML｜function_calls>"
    )
    assert _calls(text) == [("get_weather", {"city": "Paris\n", "hours": [9, 12]}, "ok_strict", "deepseek_v32")]


def test_dsml_with_reasoning_and_content_before() -> None:
    """Thinking, then prose, then the DSML block: the call, the content and the reasoning are each where they belong."""
    out = parse_tool_calls("<think>Need the weather.</think>Checking.\n\n" + DSML_JSON, TOOLS)
    assert [(c.name, c.arguments) for c in out.calls] == [("get_weather", {"city": "Paris", "days": 2})]
    assert (out.content, out.reasoning) == ("Checking.", "Need the weather.")


def test_dsml_cut_off_inside_a_parameter_is_truncated() -> None:
    """An output that ends inside a DSML parameter is a Truncated candidate, not a call."""
    text = (
        '<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n'
        '<｜DSML｜parameter name="city" string="true">Par'
    )
    out = parse_tool_calls(text, TOOLS, finish_reason="length")
    assert (out.calls, [c.bucket for c in out.candidates]) == ((), ["Truncated"])


def test_dsml_markup_in_prose_is_not_a_call() -> None:
    """The DSML prefix mentioned in prose, with no invoke tag, gives no candidate."""
    out = parse_tool_calls("DeepSeek writes <｜DSML｜function_calls> before its calls.", TOOLS)
    assert (out.calls, out.candidates) == ((), ())


def test_invoke_without_dsml_takes_string_attributes_and_a_json_body() -> None:
    """The same markup without ｜DSML｜ (the simplified form) is XML invoke, string attributes and JSON bodies too."""
    text = (
        '<function_calls>\n<invoke name="get_weather">\n<parameter name="city" string="true">Oslo</parameter>\n'
        '<parameter name="days" string="false">1</parameter>\n</invoke>\n'
        '<invoke name="get_weather">\n{"city": "Rome"}\n</invoke>\n</function_calls>'
    )
    assert [(c.name, c.arguments) for c in xml_invoke.find(text)] == [
        ("get_weather", {"city": "Oslo", "days": 1}),
        ("get_weather", {"city": "Rome"}),
    ]


SEED = (
    "<seed:think>The user wants the weather in Paris. I will call get_weather.</seed:think>"
    "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n"
    "<parameter=days>2</parameter>\n</function>\n</seed:tool_call>"
)


def test_seed_oss_call_after_seed_think() -> None:
    """<seed:think> is reasoning; the <seed:tool_call> block is a seed_oss call spanning its wrapper."""
    out = parse_tool_calls(SEED, TOOLS)
    assert [(c.name, c.arguments, c.format) for c in out.calls] == [
        ("get_weather", {"city": "Paris", "days": 2}, "seed_oss")
    ]
    assert (out.content, out.reasoning) == ("", "The user wants the weather in Paris. I will call get_weather.")
    (found,) = seed_oss.find(SEED)
    assert found.raw.startswith("<seed:tool_call>") and found.raw.endswith("</seed:tool_call>")


def test_seed_oss_example_in_reasoning_then_the_real_call_yields_only_the_real_one() -> None:
    """A call written as an example inside <seed:think> is not taken when a real call follows it."""
    text = (
        "<seed:think>The format is <seed:tool_call><function=get_weather><parameter=city>Rome</parameter>"
        "</function></seed:tool_call>, so for Paris I write the same.</seed:think>"
        "<seed:tool_call><function=get_weather><parameter=city>Paris</parameter></function></seed:tool_call>"
    )
    out = parse_tool_calls(text, TOOLS)
    assert [(c.name, c.arguments, c.flags) for c in out.calls] == [("get_weather", {"city": "Paris"}, frozenset())]
    assert [c.arguments for c in out.candidates] == [{"city": "Paris"}]


def test_seed_oss_call_only_in_reasoning_is_recovered_and_flagged() -> None:
    """With no call outside it, the call inside <seed:think> is recovered and flagged in_reasoning."""
    text = "<seed:think><seed:tool_call><function=get_time></function></seed:tool_call></seed:think>"
    out = parse_tool_calls(text, TOOLS)
    assert [(c.name, c.flags) for c in out.calls] == [("get_time", frozenset({"in_reasoning"}))]


def test_seed_oss_opened_by_the_prompt() -> None:
    """reasoning_open with Seed-OSS: everything up to </seed:think> is reasoning."""
    text = "thinking about Paris</seed:think><seed:tool_call><function=get_time></function></seed:tool_call>"
    out = parse_tool_calls(text, TOOLS, reasoning_open=True)
    assert ([(c.name, c.format) for c in out.calls], out.reasoning) == (
        [("get_time", "seed_oss")],
        "thinking about Paris",
    )


@pytest.mark.parametrize("name", ["kimi_k2", "seed_oss", "deepseek_v32"])
def test_new_families_have_a_tool_format_name_and_a_place_in_auto(name: str) -> None:
    """Each family is selectable by name and runs in auto when its marker appears."""
    samples = {
        "kimi_k2": "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_time:0"
        "<|tool_call_argument_begin|>{}<|tool_call_end|><|tool_calls_section_end|>",
        "seed_oss": SEED,
        "deepseek_v32": DSML_XML,
    }
    assert [f.name for f in select_formats(samples[name], name)] == [name]
    assert name in [f.name for f in select_formats(samples[name], "auto")]
    assert {c.format for c in parse_tool_calls(samples[name], TOOLS).calls} == {name}


@pytest.mark.parametrize(
    "text",
    [
        ' to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>{"city": "Paris"}<|call|>',
        ' to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}<|call|>',
        ' to=functions.get_weather<|channel|>analysis<|message|>{"city": "Paris"}<|call|>',
        "<|channel|>analysis<|message|>Need the weather.<|end|>"
        ' to=functions.get_weather<|channel|>commentary<|message|>{"city": "Paris"}<|call|>',
    ],
)
def test_harmony_recipient_before_the_channel(text: str) -> None:
    """The prompt held <|start|>assistant, so the output starts with the recipient: a strict harmony call."""
    assert _calls(text) == [("get_weather", {"city": "Paris"}, "ok_strict", "harmony")]
    (found,) = harmony.find(text)
    assert found.raw.lstrip().startswith("to=functions.get_weather")


def test_harmony_recipient_in_prose_before_a_channel_is_not_one() -> None:
    """to= words that do not end right at the channel token address nothing."""
    text = "Send it to=functions.get_weather please.<|channel|>final<|message|>Done."
    assert parse_tool_calls(text, TOOLS).calls == ()
