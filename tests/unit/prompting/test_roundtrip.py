"""Calls written in each tool format are read back exactly by the parser, with the format's parser name."""

from __future__ import annotations

import pytest

from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.prompting import FORMATS
from tooldispatch.toolspec import ToolSpec

ROUTE = ToolSpec(
    "plan_route",
    "",
    {
        "type": "object",
        "properties": {
            "origin": {"type": "string"},
            "stops": {"type": "array", "items": {"type": "string"}},
            "express": {"type": "boolean"},
            "max_kg": {"type": "number"},
        },
        "required": ["origin"],
    },
)
ARGS = {"origin": "Depot 7", "stops": ["Oslo", "Bergen"], "express": True, "max_kg": 12.5}


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_written_call_parses_strictly(name: str) -> None:
    """The call text a format writes for the history parses as one strict call with the same arguments."""
    fmt = FORMATS[name]
    outcome = parse_tool_calls(fmt.calls([("plan_route", ARGS)]), [ROUTE], tool_format=fmt.parser_format)
    assert [(c.name, c.arguments, c.bucket) for c in outcome.calls] == [("plan_route", ARGS, "ok_strict")]
