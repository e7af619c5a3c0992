"""An echoed tool schema is no call: one rule (``is_schema_echo``) for the strict stage, the lane and the fallback."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.parsing.formats._common import is_schema_echo
from tooldispatch.policy import ToolPolicy
from tooldispatch.toolspec import ToolSpec, normalize_tools

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
_DECLARED: list[dict[str, Any]] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}},
    {
        "type": "function",
        "function": {
            "name": "define_form",
            "parameters": {
                "type": "object",
                "properties": {"type": {"type": "string"}, "properties": {"type": "object"}},
                "required": ["properties"],
            },
        },
    },
]
# The tools these tests read calls for are declared read-only: their calls may stand in running text and
# their names be repaired to a near match (a tool given as a plain dict is side-effecting: test_prose.py).
TOOLS: list[ToolSpec] = list(ToolPolicy.read_only(why="test tools").declare(normalize_tools(_DECLARED).values()))


@pytest.mark.parametrize(
    ("value", "echo"),
    [
        (SCHEMA, True),
        ({"properties": {"city": {"type": "string"}}}, True),
        ({"properties": {"city": {"description": "a city"}}, "required": []}, True),
        ({"type": "object", "properties": {}, "title": "Args", "$schema": "x"}, True),
        ({"type": "object", "properties": {}, "city": "Paris"}, False),
        ({"properties": {"city": "Paris"}}, False),
        ({"properties": "none"}, False),
        ({"city": "Paris"}, False),
        ([SCHEMA], False),
    ],
)
def test_the_one_rule_says_which_values_are_schemas(value: Any, echo: bool) -> None:
    """An object schema with only schema keys is an echo; values, extra keys and non-objects are not."""
    assert is_schema_echo(value) is echo


def test_a_tool_that_takes_properties_keeps_its_arguments() -> None:
    """takes_properties turns the rule off for a tool whose own arguments hold a properties key."""
    assert is_schema_echo(SCHEMA, takes_properties=True) is False


@pytest.mark.parametrize(
    "text",
    [
        # the strict stage (a hermes block), also through the strict lane
        '<tool_call>{"name": "get_weather", "arguments": ' + json.dumps(SCHEMA) + "}</tool_call>",
        # the strict lane's bare Llama 3 JSON and list shapes
        '{"name": "get_weather", "parameters": ' + json.dumps(SCHEMA) + "}",
        '[{"name": "get_weather", "arguments": ' + json.dumps(SCHEMA) + "}]",
        # the fallback: a declaration copied back, and a schema under the tool's name
        '{"type": "function", "function": {"name": "get_weather", "parameters": ' + json.dumps(SCHEMA) + "}}",
        'Here: {"get_weather": ' + json.dumps(SCHEMA) + "}",
    ],
)
@pytest.mark.parametrize("strict_lane", [True, False])
def test_an_echoed_schema_is_no_call_on_every_route(text: str, strict_lane: bool) -> None:
    """The schema of get_weather written back where its arguments belong gives no call, with or without the lane."""
    assert parse_tool_calls(text, TOOLS, strict_lane=strict_lane).calls == ()


def test_a_schema_shaped_value_of_a_tool_that_takes_one_is_a_call() -> None:
    """define_form takes type and properties: the fallback keeps its call (strict finds cannot tell, and drop it)."""
    args = {"type": "object", "properties": {"name": {"type": "string"}}}
    outcome = parse_tool_calls('Sure: {"define_form": ' + json.dumps(args) + "}", TOOLS)
    assert [(c.name, c.arguments) for c in outcome.calls] == [("define_form", args)]
