"""Doubled braces: a whole output that is one call inside ``{{ ... }}`` is read with its own named repair."""

from __future__ import annotations

from typing import Any

import pytest

from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.parsing.lenient import doubled_braces
from tooldispatch.types import ParseOutcome

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
DOUBLED = "{" + CALL + "}"  # what Qwen2.5-Coder-1.5B wrote through the proxy


def _calls(outcome: ParseOutcome) -> list[tuple[str, dict[str, Any], str, str, str, list[dict[str, Any]]]]:
    return [(c.name, c.arguments, c.bucket, c.format, c.stage, [r.to_dict() for r in c.repairs]) for c in outcome.calls]


def _candidates(outcome: ParseOutcome) -> list[tuple[str, str]]:
    return [(c.bucket, c.stage) for c in outcome.candidates]


REPAIR = {"kind": "doubled_braces", "path": "", "before": "doubled_braces", "after": None, "distance": 0}


@pytest.mark.parametrize("tool_format", ["hermes", "auto", "json"])
def test_whole_output_in_doubled_braces_is_one_call(tool_format: str) -> None:
    """The call inside the extra braces is read, with a ``doubled_braces`` repair, and nothing is left over."""
    out = parse_tool_calls(DOUBLED, TOOLS, tool_format=tool_format)
    assert _calls(out) == [
        ("get_weather", {"city": "Paris"}, "ok_fallback", "doubled_braces:json", "fallback", [REPAIR])
    ]
    assert (out.content, out.stage) == ("", "fallback")


def test_whitespace_around_the_text_does_not_matter() -> None:
    """JSON whitespace before and after the doubled braces is not content."""
    out = parse_tool_calls("\n " + DOUBLED + "\n", TOOLS, tool_format="hermes")
    assert _calls(out) == [
        ("get_weather", {"city": "Paris"}, "ok_fallback", "doubled_braces:json", "fallback", [REPAIR])
    ]
    assert out.content == ""


def test_a_misspelled_name_inside_keeps_both_repairs_in_order() -> None:
    """The doubled-brace repair comes first, then the name repair the call needed (a read-only tool's, bounded)."""
    out = parse_tool_calls(DOUBLED.replace("get_weather", "get_weathr"), TOOLS, tool_format="hermes", repair="bounded")
    assert _calls(out) == [
        (
            "get_weather",
            {"city": "Paris"},
            "repaired",
            "doubled_braces:json",
            "repair",
            [REPAIR, {"kind": "name", "path": "", "before": "get_weathr", "after": "get_weather", "distance": 1}],
        )
    ]


@pytest.mark.parametrize(
    "text",
    [
        "Use " + DOUBLED + " in the template.",
        DOUBLED + " " + DOUBLED.replace("Paris", "Oslo"),
        '{{"city": "Paris"}}',
        "{" + CALL,
        "{{" + CALL + "}}",
        '{{ name }} and {{"name": "get_weather"}}',
    ],
)
def test_no_call_is_made_from_doubled_braces_that_are_not_the_whole_wrapper(text: str) -> None:
    """Doubled braces in prose, twice, around no call, unbalanced or tripled give no call; the text stays."""
    out = parse_tool_calls(text, TOOLS, tool_format="hermes")
    assert (_calls(out), _candidates(out), out.content) == ([], [], text)


def test_doubled_braces_inside_tags_stay_a_rejected_candidate() -> None:
    """Inside <tool_call> tags the doubled braces are not the only wrapper: still invalid JSON, as before."""
    out = parse_tool_calls(f"<tool_call>\n{DOUBLED}\n</tool_call>", TOOLS, tool_format="hermes")
    assert (_calls(out), _candidates(out)) == ([], [("InvalidJson", "strict")])


def test_doubled_braces_span() -> None:
    """The inner object's span, for a whole text in one extra pair of touching braces only."""
    assert doubled_braces(DOUBLED) == (1, 1 + len(CALL))
    assert doubled_braces("\n " + DOUBLED + " \n") == (3, 3 + len(CALL))
    refused = [
        "{ " + CALL + " }",
        "{" + CALL,
        "x" + DOUBLED,
        DOUBLED + "x",
        "{[1, 2]}",
        "{{}",
        "{{",
        "{" + CALL + CALL + "}",
        '{{"a": }}',
    ]
    assert [doubled_braces(t) for t in refused] == [None] * len(refused)
