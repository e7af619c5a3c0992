"""Strict finders for the XML-like formats: qwen3-coder, XML invoke (MiniMax/Claude-style), GLM."""

from __future__ import annotations

from typing import Any

import pytest

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats import glm, qwen3_coder, xml_invoke


def _calls(found: list[RawCall]) -> list[tuple[str | None, Any, str, str]]:
    return [(c.name, c.arguments, c.format, c.stage) for c in found]


# qwen3-coder


def test_qwen3_coder_wrapped_call_strips_value_newlines() -> None:
    """<tool_call><function=…><parameter=…> reads string values without the template's newlines."""
    text = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
    found = qwen3_coder.find(text)
    assert _calls(found) == [("get_weather", {"city": "Paris"}, "qwen3_coder", "strict")]
    assert found[0].span == (0, len(text))


def test_qwen3_coder_without_wrapper_and_multiple() -> None:
    """Bare <function=…> blocks are calls too, one per block; values are the text as written (typed later)."""
    text = (
        '<function=a><parameter=n>5</parameter><parameter=tags>["x", "y"]</parameter></function><function=b></function>'
    )
    assert _calls(qwen3_coder.find(text)) == [
        ("a", {"n": "5", "tags": '["x", "y"]'}, "qwen3_coder", "strict"),
        ("b", {}, "qwen3_coder", "strict"),
    ]


def test_qwen3_coder_multiline_value_keeps_inner_newlines() -> None:
    """Only one leading and one trailing newline are dropped from a value."""
    found = qwen3_coder.find("<function=w><parameter=code>\nline1\nline2\n\n</parameter></function>")
    assert found[0].arguments == {"code": "line1\nline2\n"}


def test_qwen3_coder_cut_off_parameter_is_truncated_and_incomplete() -> None:
    """A call cut inside a parameter is truncated and records missing_closer."""
    found = qwen3_coder.find("<tool_call>\n<function=a>\n<parameter=x>\nhal")
    assert [(c.name, c.arguments, c.truncated, c.lenient) for c in found] == [
        ("a", {"x": "hal"}, True, ("unclosed_tag", "missing_closer"))
    ]


@pytest.mark.parametrize(
    "tail",
    ["<", "<param", "<parameter=", "<parameter=unit", "<parameter=unit>"],
)
def test_qwen3_coder_cut_inside_the_next_parameter_tag_is_incomplete(tail: str) -> None:
    """A text that ends inside the next parameter's tag was cut off: the call is not complete."""
    found = qwen3_coder.find("<function=a>\n<parameter=x>\nhal\n</parameter>\n" + tail)
    assert [(c.arguments, c.truncated, c.lenient) for c in found] == [
        ({"x": "hal"} if not tail.endswith(">") else {"x": "hal", "unit": ""}, True, ("unclosed_tag", "missing_closer"))
    ]


def test_qwen3_coder_cut_after_a_complete_parameter_is_only_unclosed() -> None:
    """Cut right after a closed parameter, nothing of the next one arrived: only the call's tag is missing."""
    found = qwen3_coder.find("<function=a>\n<parameter=x>\nhal\n</parameter>\n")
    assert [(c.arguments, c.truncated, c.lenient) for c in found] == [({"x": "hal"}, True, ("unclosed_tag",))]


def test_qwen3_coder_negatives() -> None:
    """Prose and an incomplete tag are not calls."""
    assert qwen3_coder.find("Call functions with the function= syntax.") == []
    assert qwen3_coder.find("<function=\nname>") == []


# XML invoke


def test_minimax_wrapper_with_two_invokes() -> None:
    """<minimax:tool_call> holding two invokes gives two calls; spans reach the wrapper tags."""
    text = (
        '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">Paris</parameter>\n</invoke>\n'
        '<invoke name="get_time">\n</invoke>\n</minimax:tool_call>'
    )
    found = xml_invoke.find(text)
    assert _calls(found) == [
        ("get_weather", {"city": "Paris"}, "xml_invoke", "strict"),
        ("get_time", {}, "xml_invoke", "strict"),
    ]
    assert (found[0].span[0], found[1].span[1]) == (0, len(text))


@pytest.mark.parametrize("tail", ["<par", '<parameter name="max_', '<parameter name="max_results"'])
def test_invoke_cut_inside_the_next_parameter_tag_is_incomplete(tail: str) -> None:
    """An invoke that ends inside its next parameter's tag was cut off."""
    found = xml_invoke.find('<invoke name="search_web">\n<parameter name="query">strix</parameter>\n' + tail)
    assert [(c.arguments, c.truncated, c.lenient) for c in found] == [
        ({"query": "strix"}, True, ("unclosed_tag", "missing_closer"))
    ]


def test_function_calls_wrapper_and_json_values() -> None:
    """Claude-style <function_calls> works; every value is the text as written (typed later by the schema)."""
    text = (
        "<function_calls><invoke name='search'><parameter name='tags'>[\"a\"]</parameter>"
        "<parameter name='limit'>3</parameter></invoke></function_calls>"
    )
    assert _calls(xml_invoke.find(text)) == [("search", {"tags": '["a"]', "limit": "3"}, "xml_invoke", "strict")]


def test_invoke_negatives() -> None:
    """An invoke tag without a name and prose about invoking are not calls."""
    assert xml_invoke.find("<invoke>x</invoke>") == []
    assert xml_invoke.find("I will invoke the tool now.") == []


def test_invoke_placeholder_is_skipped() -> None:
    """A placeholder tool name copied from the prompt is not a call."""
    assert xml_invoke.find('<invoke name="tool_name"><parameter name="k">v</parameter></invoke>') == []


# GLM


def test_glm_call_with_pairs() -> None:
    """<tool_call>name<arg_key>…<arg_value>… reads each pair; values are the text as written (typed later)."""
    text = (
        "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n"
        "<arg_key>days</arg_key>\n<arg_value>[1, 2]</arg_value>\n</tool_call>"
    )
    found = glm.find(text)
    assert _calls(found) == [("get_weather", {"city": "Paris", "days": "[1, 2]"}, "glm", "strict")]
    assert found[0].span == (0, len(text))


def test_glm_no_argument_call_and_multiple() -> None:
    """A bare name is a call without arguments; several blocks give several calls (GLM-4.7 spacing)."""
    text = "<tool_call>get_time</tool_call><tool_call>ls<arg_key>dir</arg_key><arg_value>src</arg_value></tool_call>"
    assert _calls(glm.find(text)) == [("get_time", {}, "glm", "strict"), ("ls", {"dir": "src"}, "glm", "strict")]


def test_glm_cut_off_value_is_truncated() -> None:
    """A block cut inside a value is truncated and incomplete."""
    found = glm.find("<tool_call>ls<arg_key>dir</arg_key><arg_value>sr")
    assert [(c.name, c.arguments, c.truncated, c.lenient) for c in found] == [
        ("ls", {"dir": "sr"}, True, ("unclosed_tag", "missing_closer"))
    ]


@pytest.mark.parametrize("tail", ["<", "<arg_k", "<arg_key>"])
def test_glm_cut_inside_the_next_key_tag_is_incomplete(tail: str) -> None:
    """A block that ends inside the next ``<arg_key>`` was cut off, though every pair before it is complete."""
    found = glm.find("<tool_call>ls<arg_key>dir</arg_key><arg_value>src</arg_value>\n" + tail)
    assert [(c.arguments, c.truncated, c.lenient) for c in found] == [
        ({"dir": "src"}, True, ("unclosed_tag", "missing_closer"))
    ]


def test_glm_negatives() -> None:
    """JSON bodies belong to hermes, prose bodies to nobody."""
    assert glm.find('<tool_call>{"name": "a", "arguments": {}}</tool_call>') == []
    assert glm.find("<tool_call>I would call a tool here</tool_call>") == []
