"""The fallback stage: anchored call-like spans the strict formats did not claim, and nothing else."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.fallback import find_fallback
from tooldispatch.repair import resolve_name
from tooldispatch.toolspec import ToolSpec, normalize_tools

TOOLS = normalize_tools(
    [
        {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
                "required": ["city"],
            },
        },
        {
            "name": "update_record",
            "parameters": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "lifecycle": {"type": "string"}},
                "required": ["id"],
            },
        },
        {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
    ]
)
PARIS = {"city": "Paris"}


def one(text: str, tools: dict[str, ToolSpec] = TOOLS) -> RawCall:
    calls = find_fallback(text, tools)
    assert len(calls) == 1, calls
    return calls[0]


def summary(call: RawCall) -> tuple[Any, ...]:
    return (call.span, call.format, call.name, call.arguments, call.lenient, call.truncated, call.decode_error)


# -- positives ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'Sure! {"name": "get_weather", "arguments": {"city": "Paris"}} Done.',
            ((6, 61), "json", "get_weather", PARIS, (), False, None),
        ),
        (
            '{"tool": "get_weather", "input": {"city": "Paris"}}',
            ((0, 51), "json", "get_weather", PARIS, (), False, None),
        ),
        (
            '{"tool_name": "get_weather", "parameters": {"city": "Paris"}}',
            ((0, 61), "json", "get_weather", PARIS, (), False, None),
        ),
        ('{"get_weather": {"city": "Paris"}}', ((0, 34), "json", "get_weather", PARIS, (), False, None)),
        (
            "{'name': 'get_weather', 'args': {'city': 'Paris',}}",
            ((0, 51), "json", "get_weather", PARIS, ("single_quotes", "trailing_comma"), False, None),
        ),
        (
            'update_record {"lifecycle": "active", "id": 3}',
            ((0, 46), "named_json", "update_record", {"lifecycle": "active", "id": 3}, (), False, None),
        ),
        ('get_weather({"city": "Paris"})', ((0, 30), "named_json", "get_weather", PARIS, (), False, None)),
        ('I will call get_weather: {"city": "Paris"}', ((12, 42), "named_json", "get_weather", PARIS, (), False, None)),
        (
            'Thought: weather.\nAction: get_weather\nAction Input: {"city": "Paris"}',
            ((18, 69), "react", "get_weather", PARIS, (), False, None),
        ),
        (
            "get_weather(city=\"Paris\", unit='c')",
            ((0, 35), "python_call", "get_weather", {"city": "Paris", "unit": "c"}, (), False, None),
        ),
        ("Calling get_time() now", ((8, 18), "python_call", "get_time", {}, (), False, None)),
        (
            "get_weather(city='Paris', tags=['a', 1, -2.5, True, None, {'k': (1, 2)}])",
            (
                (0, 73),
                "python_call",
                "get_weather",
                {"city": "Paris", "tags": ["a", 1, -2.5, True, None, {"k": [1, 2]}]},
                (),
                False,
                None,
            ),
        ),
    ],
)
def test_bare_shapes_anchored_on_a_declared_name(text: str, expected: tuple[Any, ...]) -> None:
    """Each bare call shape gives one candidate with the exact span, format, name and arguments."""
    assert summary(one(text)) == expected


def test_arguments_given_as_a_json_string_are_decoded() -> None:
    """A JSON string under ``arguments`` is decoded, and its lenient fixes are kept with the text as written."""
    call = one('{"function": "get_weather", "arguments": "{\'city\': \'Paris\'}"}')
    assert (call.arguments, call.arguments_text, call.lenient) == (PARIS, "{'city': 'Paris'}", ("single_quotes",))


def test_openai_wrapper_object_yields_its_call_and_covers_the_wrapper() -> None:
    """``{"tool_calls": [{"type": "function", "function": {...}}]}`` gives the inner call spanning the whole object."""
    text = (
        '{"tool_calls": [{"type": "function", "function": '
        '{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}}]}'
    )
    call = one(text)
    assert (call.span, call.name, call.arguments) == ((0, len(text)), "get_weather", PARIS)


def test_a_list_of_call_objects_gives_each_call_and_covers_the_brackets() -> None:
    """A JSON list of calls yields every call, and the brackets and commas belong to the calls."""
    text = 'x [{"name": "get_weather", "arguments": {"city": "Paris"}}, {"name": "get_time", "arguments": {}}] y'
    calls = find_fallback(text, TOOLS)
    assert [(c.span, c.name, c.arguments) for c in calls] == [
        ((2, 58), "get_weather", PARIS),
        ((58, 98), "get_time", {}),
    ]


@pytest.mark.parametrize(
    ("text", "fmt", "lenient"),
    [
        (
            '<Tool_Call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>',
            "tag:json",
            ("wrapper_tag",),
        ),
        (
            '< tool_call >{"name": "get_weather", "arguments": {"city": "Paris"}}</ tool_call >',
            "tag:json",
            ("wrapper_tag",),
        ),
        ('<tool_cal>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_cal>', "tag:json", ("wrapper_tag",)),
        (
            '<function_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</function_call>',
            "tag:json",
            ("wrapper_tag",),
        ),
        ('<tools>get_weather {"city": "Paris"}</tools>', "tag:named_json", ("wrapper_tag",)),
        (
            '<toolcall>\n{"name": "get_weather", "arguments": {"city": "Paris"}}',
            "tag:json",
            ("wrapper_tag", "unclosed_tag"),
        ),
        ('<tool_call>get_weather(city="Paris")</tool_call>', "tag:python_call", ()),
        ('```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```', "fence:json", ("fence",)),
        ('```tool_call\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```', "fence:json", ("fence",)),
        ('```\n{"name": "get_weather", "arguments": {"city": "Paris"}}', "fence:json", ("fence", "unclosed_tag")),
    ],
)
def test_tolerant_wrappers_are_part_of_the_span(text: str, fmt: str, lenient: tuple[str, ...]) -> None:
    """Misspelled, re-cased, spaced, unclosed tags and fences wrap the call; the span covers them."""
    call = one(text)
    assert (call.span, call.format, call.name, call.arguments, call.lenient) == (
        (0, len(text)),
        fmt,
        "get_weather",
        PARIS,
        lenient,
    )


def test_stray_closing_tag_after_a_call_is_absorbed() -> None:
    """A closing tag with no opening one, right after the call, belongs to the call's span."""
    text = '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call> bye'
    assert one(text).span == (0, 68)


def test_names_are_kept_as_written_when_resolvable() -> None:
    """A misspelled but resolvable name anchors the candidate and is reported as written."""
    assert resolve_name("get_wether", TOOLS, level="bounded")[0] == "get_weather"
    assert one('{"name": "get_wether", "arguments": {"city": "Paris"}}').name == "get_wether"
    assert one('{"name": "functions.get_weather", "arguments": {"city": "Paris"}}').name == "get_weather"


def test_truncated_object_at_the_end_is_marked() -> None:
    """An object cut off at the end of the text is a truncated candidate with what could be read."""
    call = one('{"name": "get_weather", "arguments": {"city": "Par')
    assert summary(call) == ((0, 50), "json", "get_weather", {"city": "Par"}, ("missing_closer",), True, None)


def test_truncated_python_call_at_the_end_is_marked() -> None:
    """A python call cut off at the end is truncated and records the missing closer."""
    call = one('get_weather(city="Par')
    assert summary(call) == ((0, 21), "python_call", "get_weather", {"city": "Par"}, ("missing_closer",), True, None)


def test_undecodable_arguments_keep_the_name_and_the_error() -> None:
    """An anchored call whose arguments cannot be read is a candidate with decode_error."""
    call = one('{"name": "get_weather", "arguments": {"city": Paris}}')
    assert (call.name, call.arguments, call.arguments_text, call.decode_error) == (
        "get_weather",
        None,
        '{"city": Paris}',
        "unquoted text 'Paris' where a value should be at offset 9",
    )


def test_truncated_call_after_a_stray_brace_starts_at_its_own_object() -> None:
    """A cut-off call after an unclosed brace in prose spans only the call object."""
    call = one('Use { to group. {"name": "get_weather", "arguments": {"city": "Par')
    assert (call.span, call.arguments, call.truncated) == ((16, 66), {"city": "Par"}, True)


def test_arguments_string_cut_inside_a_complete_object_is_undecodable() -> None:
    """A JSON-string argument that ends mid-value inside a closed object is a decode error, not a partial call."""
    call = one('{"name": "get_weather", "arguments": "{\\"city\\": \\"Par"} ok')
    assert (call.arguments, call.decode_error, call.truncated) == (
        None,
        "the arguments string ends inside a value",
        False,
    )


def test_excluded_spans_are_not_searched() -> None:
    """Text inside an exclude span is never a fallback candidate; text outside still is."""
    first = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    text = f"{first} and get_time()"
    assert [c.name for c in find_fallback(text, TOOLS, exclude=[(0, len(first))])] == ["get_time"]
    assert [c.span for c in find_fallback(text, TOOLS, exclude=[(0, len(first))])] == [(len(first) + 5, len(text))]
    assert find_fallback(text, TOOLS, exclude=[(0, len(text))]) == []


def test_object_cut_off_by_an_excluded_span_is_not_truncated() -> None:
    """An unclosed object that ends where a strict block starts is not marked truncated."""
    text = '{"name": "get_weather", "arguments": {"city": "Paris"}<tool_call>x</tool_call>'
    call = find_fallback(text, TOOLS, exclude=[(54, len(text))])[0]
    assert (call.span, call.arguments, call.truncated, call.lenient) == ((0, 54), PARIS, False, ("missing_closer",))


# -- negatives ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "The weather in Paris is sunny, around 20 degrees.",
        'Here is the data: {"city": "Paris", "temp": 20}',
        '{"name": "search_web", "arguments": {"query": "Paris"}}',
        '{"name": "tool_name", "arguments": {"city": "Paris"}}',
        '{"name": "<function-name>", "arguments": {"city": "Paris"}}',
        '{"name": "{{ name }}", "arguments": {"city": "Paris"}}',
        '{"name": "get_weather", "arguments": {...}}',
        '{"name": "get_weather", "arguments": "{...}"}',
        '{"name": "get_weather", "arguments": {"city": "..."}}',
        '{"name": "get_weather", "arguments": {"city": "<city>"}}',
        '{"name": "get_weather"}',
        '{"type": "function", "function": {"name": "get_weather", "description": "Weather", '
        '"parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}',
        '[{"name": "get_weather", "description": "Weather", "parameters": {"type": "object", '
        '"properties": {"city": {"type": "string"}}, "required": ["city"]}}]',
        '{"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}',
        'The result of get_weather: {"temp": 20, "sky": "clear"}',
        'def get_weather(city="Paris"):\n    return {"city": city}',
        "Use get_weather() to look it up.",
        "get_weather(city=some_variable)",
        'get_weather("Paris")',
        '```python\nimport json\nprint(json.dumps({"city": "Paris"}))\n```',
        '```json\n{"users": [{"name": "Ann", "id": 1}]}\n```',
        "<tool_call>search the web</tool_call>",
        "Braces { and } in prose, and a { left open",
    ],
)
def test_non_calls_are_never_candidates(text: str) -> None:
    """Prose, unanchored JSON, placeholders, echoed schemas and code that is not a call give nothing."""
    assert find_fallback(text, TOOLS) == []


def test_no_tools_means_no_fallback_candidates() -> None:
    """Without declared tools nothing can be anchored."""
    assert find_fallback('{"name": "get_weather", "arguments": {"city": "Paris"}}', {}) == []


def test_declared_tool_named_like_a_placeholder_is_still_a_tool() -> None:
    """A placeholder-like name is accepted when a tool with exactly that name is declared."""
    tools = normalize_tools([{"name": "tool_name", "parameters": {"type": "object", "properties": {"x": {}}}}])
    assert one('{"name": "tool_name", "arguments": {"x": 1}}', tools).name == "tool_name"


# -- robustness ---------------------------------------------------------------------------------------


def test_ten_thousand_deep_brackets_return() -> None:
    """10,000 nested brackets, closed or not, next to a tool name return without raising."""
    assert find_fallback("get_weather " + "{" * 10_000, TOOLS) == []
    assert find_fallback("[" * 10_000 + "]" * 10_000, TOOLS) == []
    deep = find_fallback('{"name": "get_weather", "arguments": ' + '{"a": ' * 10_000, TOOLS)
    assert [(c.name, c.truncated, c.decode_error is not None) for c in deep] == [("get_weather", True, True)]
    assert find_fallback("get_weather(" + "(" * 10_000, TOOLS) == []


def test_one_megabyte_inputs_return() -> None:
    """1 MB of prose, of braces, of quotes and of call-like noise returns, finding the one real call."""
    call = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    for filler in ("word ", "{", '"', "get_weather(", "{'a': ", "<tool_call>"):
        noise = filler * (1_000_000 // len(filler))
        assert isinstance(find_fallback(noise, TOOLS), list)
    found = find_fallback("word " * 200_000 + call, TOOLS)
    assert [(c.name, c.arguments) for c in found] == [("get_weather", PARIS)]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                *"{}[]()\"':,= \n<>/_`abcdeghilmnoprtuwy0123456789",
                "get_weather",
                "name",
                "get_time()",
                "```",
                "<toolcall>",
            ]
        ),
        max_size=80,
    ).map("".join)
)
def test_fallback_names_are_always_declared_or_resolvable(text: str) -> None:
    """On arbitrary text, every candidate names a declared tool, and spans are in order and never overlap."""
    previous_end = 0
    for call in find_fallback(text, TOOLS):
        assert call.name is not None
        assert resolve_name(call.name, TOOLS, level="bounded")[0] in TOOLS
        assert previous_end <= call.span[0] < call.span[1] <= len(text)
        assert call.raw == text[call.span[0] : call.span[1]]
        previous_end = call.span[1]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_unicode_never_raises(text: str) -> None:
    """Any text gives a list of in-bounds, ordered candidates and never an exception."""
    previous_end = 0
    for call in find_fallback(text, TOOLS):
        assert previous_end <= call.span[0] < call.span[1] <= len(text)
        previous_end = call.span[1]


@pytest.mark.parametrize(
    ("text", "span", "fmt"),
    [
        ('<get_weather>{"city": "Paris"}</get_weather>', (0, 44), "named_tag"),
        ('<toolcall><get_weather>{"city": "Paris"}</get_weather></toolcall>', (0, 65), "tag:named_tag"),
        ('<get_weather>\n{"city": "Paris"}\n</get_weather>', (0, 46), "named_tag"),
    ],
)
def test_the_tools_own_name_as_the_tag_around_its_arguments(text: str, span: tuple[int, int], fmt: str) -> None:
    """<NAME>{json}</NAME> (inside a wrapper tag or not) is one call to NAME spanning both tags."""
    assert summary(one(text)) == (
        span,
        fmt,
        "get_weather",
        PARIS,
        ("wrapper_tag",) if fmt.startswith("tag:") else (),
        False,
        None,
    )


def test_a_tag_that_is_no_declared_name_is_not_a_call() -> None:
    """Only a declared name, exactly, makes a tag a call's wrapper."""
    assert find_fallback('<weather>{"city": "Paris"}</weather>', TOOLS) == []
    assert find_fallback('<b>{"city": "Paris"}</b>', TOOLS) == []


@pytest.mark.parametrize(
    ("text", "start"),
    [
        ('get_weather now {"city": "Paris"}', 0),
        ('Calling get_weather tool {"city": "Paris"}', 8),
        ('get_weather\targs {"city": "Paris"}', 0),
    ],
)
def test_one_stray_word_between_a_declared_name_and_its_object(text: str, start: int) -> None:
    """NAME word {json} is the call to NAME, with the stray_word tolerance; the span starts at the name."""
    assert summary(one(text)) == ((start, len(text)), "named_json", "get_weather", PARIS, ("stray_word",), False, None)


@pytest.mark.parametrize(
    "text",
    [
        'get_weather not {"city": "Paris"}',
        'get_weather returns {"city": "Paris"}',
        'get_wether now {"city": "Paris"}',
        'get_weather two words {"city": "Paris"}',
        'get_weather now {"temp": 20}',
    ],
)
def test_a_stray_word_is_tolerated_only_after_an_exact_name_and_fitting_keys(text: str) -> None:
    """A negating word, a misspelled name, two words, or keys the tool does not take give no candidate."""
    assert find_fallback(text, TOOLS) == []
