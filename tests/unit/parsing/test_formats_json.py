"""Strict finders for the JSON-bodied formats: hermes, llama 3.x, llama 4, mistral, gemma fences."""

from __future__ import annotations

from typing import Any

import pytest

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats import gemma, hermes, llama, mistral


def _calls(found: list[RawCall]) -> list[tuple[str | None, Any, str, str]]:
    return [(c.name, c.arguments, c.format, c.stage) for c in found]


# hermes / qwen


def test_hermes_single_call() -> None:
    """One <tool_call> block with JSON gives one strict call whose span covers the tags."""
    text = 'Sure.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    found = hermes.find(text)
    assert _calls(found) == [("get_weather", {"city": "Paris"}, "hermes", "strict")]
    assert found[0].span == (6, len(text))
    assert (found[0].truncated, found[0].lenient, found[0].decode_error) == (False, (), None)


def test_hermes_multiple_calls() -> None:
    """Each <tool_call> block is a call, in order."""
    text = (
        '<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>\n'
        '<tool_call>{"name": "b", "arguments": {}}</tool_call>'
    )
    assert _calls(hermes.find(text)) == [("a", {"x": 1}, "hermes", "strict"), ("b", {}, "hermes", "strict")]


def test_hermes_bad_block_keeps_good_ones() -> None:
    """An undecodable block becomes a RawCall with decode_error; the blocks around it survive."""
    text = (
        '<tool_call>{"name": "a", "arguments": {"x": 1}}</tool_call>'
        '<tool_call>{"name": "b", "arguments": {"x": }}</tool_call>'
        '<tool_call>{"name": "c", "arguments": {}}</tool_call>'
    )
    found = hermes.find(text)
    assert [c.name for c in found] == ["a", "b", "c"]
    assert [c.decode_error is None for c in found] == [True, False, True]
    assert found[1].arguments is None


def test_hermes_lenient_json_is_stage_fallback() -> None:
    """JSON that needs lenient decoding is read and marked stage fallback with its fixes."""
    found = hermes.find("<tool_call>{'name': 'a', 'arguments': {'x': 1,}}</tool_call>")
    assert _calls(found) == [("a", {"x": 1}, "hermes", "fallback")]
    assert found[0].lenient == ("single_quotes", "trailing_comma")


def test_hermes_unclosed_at_end_is_truncated() -> None:
    """An opener with no closer at the end of the text gives truncated=True."""
    found = hermes.find('<tool_call>{"name": "a", "arguments": {"x": 1}}')
    assert _calls(found) == [("a", {"x": 1}, "hermes", "fallback")]
    assert (found[0].truncated, found[0].lenient) == (True, ("unclosed_tag",))


def test_hermes_arguments_as_json_string() -> None:
    """Arguments given as a JSON string are decoded and the fix recorded."""
    found = hermes.find('<tool_call>{"name": "a", "arguments": "{\\"x\\": 2}"}</tool_call>')
    assert _calls(found) == [("a", {"x": 2}, "hermes", "fallback")]
    assert found[0].lenient == ("arguments_as_string",)


def test_hermes_ignores_prose_and_placeholders() -> None:
    """Prose mentioning the tag and the prompt's placeholder example are not calls."""
    assert hermes.find("Use the <tool_call> tag to call tools.") == []
    assert hermes.find("Wrap calls in tool_call tags.") == []
    assert hermes.find('<tool_call {"name": "a", "arguments": {}}') == []
    placeholder = '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    assert hermes.find(placeholder) == []


def test_hermes_leaves_other_formats_bodies_alone() -> None:
    """GLM and qwen3-coder bodies inside <tool_call> are not read as hermes JSON."""
    assert hermes.find("<tool_call>get_time</tool_call>") == []
    assert hermes.find("<tool_call><function=f></function></tool_call>") == []


# llama 3.x


def test_llama3_whole_output_json() -> None:
    """A whole output that is {"name", "parameters"} is a llama3_json call."""
    found = llama.find_llama3('{"name": "get_weather", "parameters": {"city": "Paris"}}')
    assert _calls(found) == [("get_weather", {"city": "Paris"}, "llama3_json", "strict")]


def test_llama3_python_tag_with_semicolons() -> None:
    """After <|python_tag|>, calls separated by ';' are each read; <|eom_id|> is part of the span."""
    text = '<|python_tag|>{"name": "a", "parameters": {"x": 1}}; {"name": "b", "arguments": {}}<|eom_id|>'
    found = llama.find_llama3(text)
    assert _calls(found) == [("a", {"x": 1}, "llama3_json", "strict"), ("b", {}, "llama3_json", "strict")]
    assert (found[0].span[0], found[1].span[1]) == (0, len(text))


def test_llama3_python_tag_builtin_python_call() -> None:
    """<|python_tag|> followed by a Python call reads it with ast."""
    found = llama.find_llama3('<|python_tag|>brave_search.call(query="weather")')
    assert _calls(found) == [("brave_search.call", {"query": "weather"}, "llama3_json", "strict")]


def test_llama3_negatives() -> None:
    """JSON that is not a call, or a call followed by prose, is left to the fallback stage."""
    assert llama.find_llama3('{"name": "John", "age": 3}') == []
    assert llama.find_llama3('{"name": "a", "parameters": {}} and then some prose') == []
    assert llama.find_llama3('The "name" field matters.') == []


# llama 4


def test_llama4_python_list() -> None:
    """<|python_start|>[f(...), g()]<|python_end|> gives one call per element."""
    text = '<|python_start|>[get_weather(city="Paris"), get_time()]<|python_end|>'
    found = llama.find_llama4(text)
    assert _calls(found) == [
        ("get_weather", {"city": "Paris"}, "llama4", "strict"),
        ("get_time", {}, "llama4", "strict"),
    ]
    assert found[0].span == (0, len(text))


def test_llama4_unclosed_is_truncated() -> None:
    """A python_start block cut off at the end is truncated."""
    found = llama.find_llama4('<|python_start|>[get_weather(city="Par')
    assert [(c.name, c.truncated, c.decode_error is not None) for c in found] == [("get_weather", True, True)]


# mistral


def test_mistral_json_list() -> None:
    """[TOOL_CALLS] with a JSON list gives one call per element, spans covering the list."""
    text = '[TOOL_CALLS][{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]'
    found = mistral.find(text)
    assert _calls(found) == [("a", {"x": 1}, "mistral", "strict"), ("b", {}, "mistral", "strict")]
    assert (found[0].span[0], found[0].span[1], found[1].span[1]) == (0, found[1].span[0], len(text))


def test_mistral_list_bad_element_keeps_good_ones() -> None:
    """One broken element of the list does not drop its neighbours."""
    text = '[TOOL_CALLS][{"name": "a", "arguments": {"x": }}, {"name": "b", "arguments": {}}]'
    found = mistral.find(text)
    assert [(c.name, c.decode_error is None) for c in found] == [("a", False), ("b", True)]


def test_mistral_v11_args_and_repeated_token() -> None:
    """name[ARGS]{json}, repeated with [TOOL_CALLS], gives one call each."""
    text = '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{}'
    assert _calls(mistral.find(text)) == [
        ("get_weather", {"city": "Paris"}, "mistral", "strict"),
        ("get_time", {}, "mistral", "strict"),
    ]


def test_mistral_name_json_and_call_id() -> None:
    """name{json} and name[CALL_ID]id[ARGS]{json} are both read."""
    assert _calls(mistral.find('[TOOL_CALLS]f{"a": 1}')) == [("f", {"a": 1}, "mistral", "strict")]
    text = '[TOOL_CALLS]f[CALL_ID]abc123XYZ[ARGS]{"a": 2}'
    assert _calls(mistral.find(text)) == [("f", {"a": 2}, "mistral", "strict")]


def test_mistral_negatives() -> None:
    """Prose about the token and a bare token are not calls."""
    assert mistral.find("The model prints [TOOL_CALLS] before calls.") == []
    assert mistral.find('[TOOL_CALLS {"name": "a", "arguments": {}}') == []


# gemma


def test_gemma_tool_code_fence() -> None:
    """A tool_code fence holding a Python call is a gemma call."""
    text = 'Checking.\n```tool_code\nget_weather(city="Paris")\n```'
    found = gemma.find(text)
    assert _calls(found) == [("get_weather", {"city": "Paris"}, "gemma", "strict")]
    assert found[0].span == (10, len(text))


def test_gemma_multiple_lines_and_json_fence() -> None:
    """One call per line in tool_code, and JSON in a tool_call fence."""
    found = gemma.find("```tool_code\nprint(default_api.a(x=1))\nb()\n```")
    assert _calls(found) == [("a", {"x": 1}, "gemma", "strict"), ("b", {}, "gemma", "strict")]
    found = gemma.find('```tool_call\n{"name": "a", "arguments": {"x": 1}}\n```')
    assert _calls(found) == [("a", {"x": 1}, "gemma", "strict")]


def test_gemma_negatives() -> None:
    """A python fence and a tool_code fence with plain code are not calls."""
    assert gemma.find('```python\nget_weather(city="Paris")\n```') == []
    found = gemma.find("```tool_code\nx = 1\n```")
    assert [(c.name, c.decode_error) for c in found] == [("x", "not a Python call")]


def test_hermes_opener_inside_a_string_does_not_end_the_block() -> None:
    """A string argument holding "<tool_call>" stays in its call; a real unclosed block still ends at the next one."""
    text = '<tool_call>{"name": "f", "arguments": {"q": "<tool_call>", "n": 1}}</tool_call>'
    assert _calls(hermes.find(text)) == [("f", {"q": "<tool_call>", "n": 1}, "hermes", "strict")]
    cut = '<tool_call>{"name": "f", "arguments": {"q": "a"<tool_call>{"name": "g", "arguments": {}}</tool_call>'
    assert [(c.name, c.lenient) for c in hermes.find(cut)] == [("f", ("unclosed_tag", "missing_closer")), ("g", ())]


def test_gemma_fence_that_names_no_call_is_left_to_other_formats() -> None:
    """A tool_code fence whose body starts with no name (here a hermes tag) is not claimed; the block is found."""
    block = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    assert gemma.find("```tool_code" + block) == []
    assert gemma.find("```tool_code\n" + block + "\n```") == []
    assert [c.name for c in hermes.find("```tool_code" + block)] == ["get_weather"]


def test_llama3_several_python_tags() -> None:
    """Each <|python_tag|> payload is read, so calls emitted one after another all count."""
    text = '<|python_tag|>{"name": "a", "parameters": {}}<|eom_id|><|python_tag|>{"name": "b", "parameters": {}}'
    assert [c.name for c in llama.find_llama3(text)] == ["a", "b"]


def test_llama4_negatives() -> None:
    """Prose naming the token and a block holding no call give nothing callable."""
    assert llama.find_llama4("The model wraps code in python_start tokens.") == []
    found = llama.find_llama4("<|python_start|>print('hi') if x else y<|python_end|>")
    assert [(c.name, c.decode_error) for c in found] == [("print", "not a Python call list")]


def test_hermes_template_braces_in_a_value_are_not_a_placeholder() -> None:
    """A real call whose string value holds {{ }} (a template) is still a call."""
    found = hermes.find('<tool_call>{"name": "render", "arguments": {"t": "Hi {{ user }}"}}</tool_call>')
    assert _calls(found) == [("render", {"t": "Hi {{ user }}"}, "hermes", "strict")]


def test_hermes_placeholder_names_are_skipped() -> None:
    """A call naming a placeholder tool (tool_name, {{ name }}) is not a call."""
    assert hermes.find('<tool_call>{"name": "tool_name", "arguments": {}}</tool_call>') == []
    assert hermes.find('<tool_call>{"name": "{{ name }}", "arguments": {}}</tool_call>') == []


def test_decode_json_after_a_failed_strict_decode_is_the_same_result() -> None:
    """Told json.loads already failed, decode_json gives exactly the result it gives when it tries again."""
    from tooldispatch.parsing.formats._common import Decoded, decode_json

    for text in ("{'city': 'Paris',}", '{"city": "Par', "not json"):
        assert decode_json(text, strict_failed=True) == decode_json(text)
    assert decode_json("{'city': 'Paris',}", strict_failed=True) == Decoded(
        {"city": "Paris"}, fixes=("single_quotes", "trailing_comma")
    )


def test_every_placeholder_mark_holds_what_the_quick_check_looks_for() -> None:
    """is_placeholder scans for "<" or "{..." before its pattern: each mark, alone and in a body, is still found."""
    from tooldispatch.parsing.formats import _common

    for mark in _common._PLACEHOLDER_MARKS:
        assert "<" in mark or "{..." in mark
        assert _common.is_placeholder(None, f'{{"name": "x", "arguments": {mark}}}')
    assert not _common.is_placeholder(None, '{"name": "x", "arguments": {"a": "{.."}}')


@pytest.mark.parametrize(
    ("text", "fmt"),
    [
        (
            '{"name": "get_weather", "parameters": {{"name": "get_weather", "parameters": {"city": "Paris"}}',
            "llama3_json",
        ),
        (
            '<tool_call>{"name": "get_weather", "arguments": {{"name": "get_weather", "arguments": {"city": "Paris"}}'
            "</tool_call>",
            "hermes",
        ),
    ],
)
def test_a_call_begun_twice_is_one_call_read_from_its_second_opening(text: str, fmt: str) -> None:
    """{"name": "f", "parameters": {{"name": "f", "parameters": {...}} is one call to f (duplicated_opener)."""
    from tooldispatch.parsing.core import parse_tool_calls

    tools = [{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    outcome = parse_tool_calls(text, tools)
    assert [(c.name, c.arguments, c.bucket, c.format, [r.before for r in c.repairs]) for c in outcome.candidates] == [
        ("get_weather", {"city": "Paris"}, "ok_fallback", fmt, ["duplicated_opener"])
    ]


def test_a_second_opening_of_another_tool_is_not_taken_as_the_same_call() -> None:
    """Only the same name opened twice is read as one call; another name inside stays what it was."""
    from tooldispatch.parsing.formats._common import _DUPLICATED_OPENER

    assert _DUPLICATED_OPENER.match('{"name": "f", "parameters": {{"name": "g", "parameters": {}}') is None
    assert _DUPLICATED_OPENER.match('{"name": "f", "parameters": {{"name": "f", "parameters": {}}') is not None
