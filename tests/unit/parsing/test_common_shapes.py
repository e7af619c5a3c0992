"""The shortcut for common output shapes gives exactly the full cascade's outcome."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldispatch.bench.parser import load_corpus
from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.policy import ToolPolicy
from tooldispatch.toolspec import ToolSpec, normalize_tools
from tooldispatch.types import ParseOutcome

CORPUS = Path(__file__).parents[2] / "fixtures" / "corpus"
_DECLARED: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
                "required": ["city"],
            },
        },
    }
]
# The tools these tests read calls for are declared read-only: their calls may stand in running text and
# their names be repaired to a near match (a tool given as a plain dict is side-effecting: test_prose.py).
TOOLS: list[ToolSpec] = list(ToolPolicy.read_only(why="test tools").declare(normalize_tools(_DECLARED).values()))
CALL = '{"name": "get_weather", "arguments": {"city": "Paris"}}'
EDGES = [
    f"<tool_call>{CALL}</tool_call>",
    f"Sure.\n<tool_call>\n{CALL}\n</tool_call>\nDone.",
    f"<tool_call>{CALL}</tool_call><tool_call>{CALL}</tool_call>",
    f"<think>plan</think>\n<tool_call>{CALL}</tool_call>",
    f"plan</think><tool_call>{CALL}</tool_call>",
    f"<think>I will call <tool_call>{CALL}</tool_call></think>",
    f"<think>a</think><think>b</think><tool_call>{CALL}</tool_call>",
    f"</think><tool_call>{CALL}</tool_call>",
    f"<tool_call>{CALL}</tool_call> and get_weather(city='Oslo')",
    f"<tool_call>{CALL}</tool_call> then {CALL}",
    f"<tool_call>{CALL}",
    f"<tool_call>{CALL}<tool_call>{CALL}</tool_call>",
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris",}}</tool_call>',
    '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Lyon\\"}"}</tool_call>',
    '<tool_call>{"name": "tool_name", "arguments": {}}</tool_call>',
    '<tool_call>{"name": "get_weather", "arguments": {"type": "object", "properties": {}}}</tool_call>',
    '<tool_call>[{"name": "get_weather", "arguments": {"city": "Rome"}}]</tool_call>',
    '<tool_call>{"function": {"name": "get_weather", "arguments": {"city": "Rome"}}}</tool_call>',
    '<tool_call>{"name": "get_weathr", "parameters": {"city": "Rome", "unit": "C"}}</tool_call>',
    f"<tool_call>```json\n{CALL}\n```</tool_call>",
    f"<|channel|>analysis<|message|>x<|end|><tool_call>{CALL}</tool_call>",
    f"[THINK]x[/THINK]<tool_call>{CALL}</tool_call>",
    CALL,
    f"  {CALL}  ",
    f"{CALL}; {CALL}",
    f"{CALL} trailing prose",
    '{"name": "get_weather", "parameters": {"city": "Paris", "note": "<think>"}}',
    '{"type": "object", "properties": {"city": {"type": "string"}}}',
    "{not json at all",
    "",
    "   ",
    "Plain prose, with no call at all.",
    "Prose that mentions get_weather and nothing else.",
    "Prose with get_weather(city='Rome') in it.",
    "Prose with a fence ```json\n{}\n```",
    f"<think>I will call\n<tool_call>{CALL}</tool_call>\n</think>\n\n",
    f"<think>I will call\n<tool_call>{CALL}</tool_call>\n</think>\nDone.",
    f"<think>First <tool_call>{CALL}</tool_call> then get_weather(city='Oslo')</think>",
    "<think>Only thoughts.</think>Only words.",
    f"<think>Thoughts with <tool_call>{CALL}</tool_call></think><tool_call>{CALL}</tool_call>",
    f"<think></think><tool_call>{CALL}</tool_call>",
    "<think> </think>Answer",
    f"<think><tool_call>{CALL}",
    '<tool_call>{"name": "get_weather", "arguments": {"city": "</tool_call>"}}</tool_call>',
    f"<tool_call>\x0c{CALL}</tool_call>",
    f"<tool_call>{CALL}\x0c</tool_call>",
    '<tool_call>{"name": " get_weather", "arguments": {"city": "Paris"}}</tool_call>',
    '<tool_call>{"name": "get_weather", "arguments": {"city": "<tool-name>"}}</tool_call>',
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}, "parameters": {}}</tool_call>',
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}, "args": {}}</tool_call>',
    '<tool_call>{"name": "get_weather", "arguments": {"city": 5}}</tool_call>',
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}}</tool_call>',
    '<tool_call>{"name": "get_weather", "arguments": " {\\"city\\": \\"Lyon\\"} "}</tool_call>',
    '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Lyon\\",}"}</tool_call>',
    '<tool_call>{"name": "get_weather", "arguments": "[1]"}</tool_call>',
    '<tool_call>{"name": "get_weather", "arguments": ""}</tool_call>',
    '<tool_call>{"name": "get_weather", "arguments": null}</tool_call>',
    '<tool_call>{"name": "get_weather", "arguments": {"city": ' + "[" * 5000 + "]" * 5000 + "}}</tool_call>",
    f"<tool_call>{CALL}</tool_call>\n"
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "f"}}</tool_call>',
    f"<think>x</think><tool_call>{CALL}</tool_call><|im_end|>",
    f"<think>x</think>\n<tool_call>{CALL}</tool_call>\nand (more)",
    '{"name": "get_weather", "arguments": "{\\"city\\": \\"Lyon\\"}"}',
    '{"name": "get_weather", "arguments": {"city": "Paris"}, "parameters": {"city": "Rome"}}',
    '{"type": "function", "name": "get_weather", "parameters": {"city": "Kyiv"}}',
    '{"name": "get_weather", "arguments": null}',
    '{"name": "get_weather"}',
    '{"name": "get_weathr", "arguments": {"city": "Paris"}}',
    f"{CALL} <tool_call>{CALL}</tool_call>",
    f"\x0c{CALL}",
    f"{CALL}\x0c",
    f"{CALL}\n\n",
    '[{"name": "get_weather", "arguments": {"city": "Jakarta"}}]',
    ' [{"name": "get_weather", "arguments": {"city": "A"}}, {"name": "get_weather", "parameters": {"city": "B"}}] \n',
    '[{"name": "get_weather", "arguments": {"city": "A"}},{"name": "get_weather", "arguments": {"city": "B"}}]',
    '[{"name": "get_weather", "arguments": {"city": "..."}}]',
    '[{"name": "get_weather", "arguments": {"city": "A"}, "id": 1}]',
    '[{"name": "get_weather", "arguments": {"city": "A"}}] trailing',
    "[" + " " * 70 + '{"name": "get_weather", "arguments": {"city": "A"}}]',
    '[{"name": "get_weather", "arguments": {"city": "A"}},]',
    "[]",
    '[{"name": "get_weather", "arguments": {"city": "<b>"}}]',
    '[{"name": "get_weather", "arguments": {"city": 1}}]',
    '[{"name": "get_weathr", "arguments": {"city": "A"}}]',
    '[{"name": "get_weather", "arguments": "{\\"city\\": \\"A\\"}"}]',
    '[{"name": "get_weather", "arguments": {"city": "A"}}; {"name": "get_weather", "arguments": {"city": "B"}}]',
    f"Checking.\n<tool_call>\n{CALL}The user wants Cairo.\n</think>\n\n<tool_call>\n{CALL}\n</tool_call>",
    f"<tool_call>{CALL}</think><tool_call>{CALL}</tool_call>",
]


SPECS = normalize_tools(TOOLS)


def _both(text: str, **kwargs: Any) -> tuple[ParseOutcome, ParseOutcome]:
    tools = kwargs.pop("tools", TOOLS)
    return parse_tool_calls(text, tools, **kwargs), parse_tool_calls(text, tools, strict_lane=False, **kwargs)


@pytest.mark.parametrize("text", EDGES)
@pytest.mark.parametrize("reasoning_open", [False, True])
@pytest.mark.parametrize("tools", [TOOLS, SPECS], ids=["list", "specs"])
def test_edges_equal_full_cascade(text: str, reasoning_open: bool, tools: Any) -> None:
    """Near-miss shapes (prose anchors, reasoning, placeholders, echoes, lists) parse as the cascade does."""
    quick, full = _both(text, reasoning_open=reasoning_open, tools=tools)
    assert quick == full


@pytest.mark.parametrize("tool_format", ["hermes", "qwen", "llama3_json", "json", "mistral"])
def test_named_formats_equal_full_cascade(tool_format: str) -> None:
    """A named tool_format takes the shortcut only for its own shape, with the cascade's outcome."""
    for text in EDGES:
        for tools in (TOOLS, SPECS):
            quick, full = _both(text, tool_format=tool_format, tools=tools)
            assert quick == full, text


def test_corpus_equals_full_cascade() -> None:
    """Every labelled corpus output parses to the same outcome with and without the shortcut."""
    for record in load_corpus(CORPUS):
        quick, full = _both(
            record.text,
            tools=record.tools,
            native_calls=record.native_calls,
            finish_reason=record.finish_reason,
            reasoning_open=record.reasoning_open,
        )
        assert quick == full, record.id


def test_strict_lane_answers_for_the_common_well_formed_shapes() -> None:
    """The strict lane reads well-formed hermes blocks (after a think block too) and bare JSON calls and lists."""
    from tooldispatch.parsing.lane import strict_outcome

    as_string = '{"name": "get_weather", "arguments": "{\\"city\\": \\"Lyon\\"}"}'
    answered = [
        strict_outcome(text, SPECS) is not None
        for text in (
            EDGES[1],
            EDGES[2],
            EDGES[3],
            f"<think>I will call <tool_call>{CALL}</tool_call></think>",
            f"<tool_call>{as_string}</tool_call>",
            CALL,
            as_string,
            '{"type": "function", "name": "get_weather", "parameters": {"city": "Kyiv"}}',
            f"[{CALL}, {CALL}]",
            f"<tool_call>{CALL}</tool_call> and get_weather(city='Oslo')",
            '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "unit": "C"}}</tool_call>',
            "Plain prose.",
        )
    ]
    assert answered == [True, True, True, True, True, True, True, True, True, False, False, False]


_PIECES = [
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    CALL,
    '{"name": "get_weather", "parameters": {"city": "Oslo"}}',
    '{"name": "tool_name", "arguments": {}}',
    "get_weather(city='Rome')",
    "[",
    "]",
    "{",
    "}",
    "(",
    "`",
    "<",
    "<|",
    "[THINK]",
    " ",
    "\n",
    "words",
    "get_weather",
    ";",
    ", ",
    '{"name": "get_weather", "arguments": "{\\"city\\": \\"Lyon\\"}"}',
    '{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "f"}}',
    "\x0c",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=12).map("".join), st.booleans(), st.sampled_from([TOOLS, SPECS]))
def test_any_mix_of_pieces_equals_full_cascade(text: str, reasoning_open: bool, tools: Any) -> None:
    """For any mix of tags, calls, reasoning markers and prose, the shortcuts change nothing in the outcome."""
    assert parse_tool_calls(text, tools, reasoning_open=reasoning_open) == _cascade_only(
        text, tools, reasoning_open=reasoning_open
    )


def _cascade_only(text: str, tools: Any, **kwargs: Any) -> ParseOutcome:
    """``parse_tool_calls`` with the strict lane off."""
    return parse_tool_calls(text, tools, strict_lane=False, **kwargs)


_RECORDS = [r for r in load_corpus(CORPUS) if r.tools_ref == "weather"]
_JUNK = ["[A(", "{", "}", "<tool_call>", "</tool_call>", "```", "</think>", "<think>", "[TOOL_CALLS]", "\n", "(", '"']
_FRAGMENTS = st.one_of(
    st.sampled_from([r.text for r in _RECORDS]),
    st.sampled_from(_JUNK),
    st.tuples(st.sampled_from([r.text for r in _RECORDS]), st.integers(0, 300), st.integers(0, 300)).map(
        lambda t: t[0][min(t[1], t[2]) : max(t[1], t[2])]
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_FRAGMENTS, max_size=5).map("".join), st.booleans())
def test_corpus_fragment_mixes_equal_full_cascade(text: str, reasoning_open: bool) -> None:
    """Whole corpus outputs, slices of them and stray markers, mixed: the shortcuts change nothing."""
    tools = _RECORDS[0].tools
    quick = parse_tool_calls(text, tools, reasoning_open=reasoning_open)
    assert quick == _cascade_only(text, tools, reasoning_open=reasoning_open)
    assert all(call.name in tools for call in quick.calls)
