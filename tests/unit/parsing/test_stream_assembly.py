"""StreamParser.close builds the outcome from its parsed call segments, and it equals the whole-text parse.

When the text is not only blocks, the whole text is parsed, and the blocks whose calls were accepted as written
are taken as read: those calls must be exactly what the hermes reader reads in the block.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.core import (
    _as_read,
    _find_common,
    assemble_blocks,
    parse_block,
    parse_from_blocks,
    parse_tool_calls,
)
from tooldispatch.parsing.formats._common import Block
from tooldispatch.parsing.formats.hermes import read_block
from tooldispatch.parsing.lane import strict_outcome
from tooldispatch.parsing.stream import StreamParser
from tooldispatch.toolspec import normalize_tools
from tooldispatch.types import Candidate, ParseOutcome

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "corpus"
TOOLS: dict[str, list[dict[str, Any]]] = json.loads((CORPUS / "tools.json").read_text())
RECORDS = [json.loads(line) for path in sorted(CORPUS.glob("*.jsonl")) for line in path.read_text().splitlines()]
STREAMABLE = [r for r in RECORDS if not r.get("native_calls")]

WEATHER = [
    {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
    {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
]
BLOCKS = [
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>',
    '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>',
    '<tool_call>{"name": "get_wether", "arguments": {"city": "Oslo", "days": "3"}}</tool_call>',
    '<tool_call>{"name": "delete_all", "arguments": {}}</tool_call>',
    '<tool_call>{"name": "get_weather", "arguments": {"days": 2}}</tool_call>',
    '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Lyon\\"}"}</tool_call>',
    '<tool_call>{"name": "tool_name", "arguments": {}}</tool_call>',
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Rome"</tool_call>',
    "<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Nice',}}</tool_call>",
]
PROSE = ["Checking the weather.\n", "Done. ", "\n\n", " a > b ", "caf\u00e9 ", ""]


def stream(text: str, tools: Any, size: int = 1, **options: Any) -> StreamParser:
    finish_reason = options.pop("finish_reason", None)
    parser = StreamParser(tools, **options)
    for start in range(0, len(text), size):
        parser.feed(text[start : start + size])
    parser.close(finish_reason)
    return parser


def parts_of(text: str, tools: Any) -> dict[str, ParseOutcome]:
    """Each block of ``text`` parsed on its own, as the stream parses its call segments."""
    specs = normalize_tools(tools)
    parts: dict[str, ParseOutcome] = {}
    for block in BLOCKS:
        if block in text:
            outcome, plain = parse_block(block, specs, tool_format="auto", repair="bounded")
            if plain:
                parts[block] = outcome
    return parts


@pytest.mark.parametrize("record", STREAMABLE, ids=[r["id"] for r in STREAMABLE])
def test_streamed_corpus_record_equals_whole_parse(record: dict[str, Any]) -> None:
    """Every corpus record fed one character at a time closes to exactly the whole-text outcome."""
    options = {"finish_reason": record.get("finish_reason"), "reasoning_open": record.get("reasoning_open", False)}
    tools = TOOLS[record["tools_ref"]]
    parser = stream(record["text"], tools, **options)
    assert parser.outcome == parse_tool_calls(record["text"], tools, **options)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(BLOCKS + PROSE), max_size=12).map("".join), st.integers(1, 7))
def test_streamed_block_mix_equals_whole_parse(text: str, size: int) -> None:
    """Any mix of hermes blocks (valid, repaired, rejected) and prose streams to the whole-text outcome."""
    assert stream(text, WEATHER, size).outcome == parse_tool_calls(text, WEATHER)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(BLOCKS + PROSE), max_size=12).map("".join))
def test_assembled_outcome_equals_whole_parse(text: str) -> None:
    """A block mix is assembled exactly when each of its blocks reads as plain JSON, and equals parse_tool_calls."""
    parts = parts_of(text, WEATHER)
    assembled = assemble_blocks(text, parts, tool_format="auto", reasoning_open=False, finish_reason=None)
    every_block_plain = all(block in parts for block in BLOCKS if block in text)
    assert (assembled is not None) == every_block_plain
    assert assembled == (parse_tool_calls(text, WEATHER) if every_block_plain else None)


def test_plain_block_mix_is_assembled_with_offsets_ids_and_content() -> None:
    """Valid and repaired blocks in prose are assembled: spans shifted, ids renumbered, content joined."""
    text = f"Checking.\n{BLOCKS[0]}\nThen {BLOCKS[2]} done.{BLOCKS[3]}"
    assembled = assemble_blocks(
        text, parts_of(text, WEATHER), tool_format="auto", reasoning_open=False, finish_reason=None
    )
    assert assembled is not None
    assert assembled == parse_tool_calls(text, WEATHER)
    assert [(c.id, c.name, c.bucket) for c in assembled.calls] == [
        ("call_0", "get_weather", "ok_strict"),
        ("call_1", "get_weather", "repaired"),
    ]
    assert [c.span for c in assembled.candidates] == [
        (10, 10 + len(BLOCKS[0])),
        (text.index(BLOCKS[2]), text.index(BLOCKS[2]) + len(BLOCKS[2])),
        (text.index(BLOCKS[3]), len(text)),
    ]
    assert assembled.content == "Checking.\n\nThen  done."


@pytest.mark.parametrize(
    ("text", "options"),
    [
        (f"<think>x</think>{BLOCKS[0]}", {}),
        (f"{BLOCKS[0]} {{not a call}}", {}),
        (f"{BLOCKS[0]}", {"finish_reason": "length"}),
        (f"{BLOCKS[0]}", {"reasoning_open": True}),
        (f"{BLOCKS[0]}", {"tool_format": "mistral"}),
    ],
)
def test_other_shapes_are_not_assembled(text: str, options: dict[str, Any]) -> None:
    """Reasoning, anchors outside the blocks, length, an open prompt or another format: None."""
    parts = parts_of(text, WEATHER)
    assembled = assemble_blocks(
        text,
        parts,
        tool_format=options.get("tool_format", "auto"),
        reasoning_open=options.get("reasoning_open", False),
        finish_reason=options.get("finish_reason"),
    )
    assert assembled is None


def test_a_block_without_its_outcome_is_not_assembled() -> None:
    """When one block of the text was not parsed on its own, the outcome is left to the whole parse."""
    text = f"{BLOCKS[0]}{BLOCKS[1]}"
    parts = {BLOCKS[0]: parts_of(text, WEATHER)[BLOCKS[0]]}
    assert assemble_blocks(text, parts, tool_format="auto", reasoning_open=False, finish_reason=None) is None


# Pieces that keep a text from being only blocks, so that the whole text is parsed.
OTHER = [
    "<think>planning the call</think>",
    "(see below) ",
    '{"name": "get_time", "arguments": {}}',
    "[THINK]hmm[/THINK]",
    "get_weather(city='Bern') ",
    "<b>bold</b> ",
]


def read_alone(block: str) -> list[RawCall]:
    """What the hermes reader reads in ``block``, a closed ``<tool_call>`` block at offset 0."""
    body_start, body_end = len("<tool_call>"), len(block) - len("</tool_call>")
    return read_block(block, Block(0, body_start, body_end, len(block), True, False))


def taken_as_read(block: str, tools: Any = WEATHER) -> list[RawCall] | None:
    outcome, plain = parse_block(block, normalize_tools(tools), tool_format="auto", repair="bounded")
    return _as_read(block, outcome) if plain else None


def test_blocks_accepted_as_written_are_taken_as_the_reader_reads_them() -> None:
    """A valid block and one with string arguments are taken as read; repaired, rejected or lenient ones are not."""
    taken = {block: taken_as_read(block) for block in BLOCKS}
    assert [block for block, calls in taken.items() if calls is not None] == [BLOCKS[0], BLOCKS[1], BLOCKS[5]]
    for block in (BLOCKS[0], BLOCKS[1], BLOCKS[5]):
        assert taken[block] == read_alone(block)
    assert [(c.stage, c.lenient, c.arguments) for c in read_alone(BLOCKS[5])] == [
        ("fallback", ("arguments_as_string",), {"city": "Lyon"})
    ]


_NAMES = st.sampled_from(["get_weather", "get_time", "get_wether", "tool_name", " get_time ", "delete_all"])
_ARGS = st.one_of(
    st.fixed_dictionaries({"city": st.sampled_from(["Paris", "<b>", "{...}"])}),
    st.fixed_dictionaries({"city": st.just("Oslo"), "days": st.sampled_from([1, "2", None])}),
    st.just({}),
    st.just({"type": "object", "properties": {}}),
)


@st.composite
def call_blocks(draw: st.DrawFn) -> str:
    """A ``<tool_call>`` block: a call object (extra keys, arguments as a string, a list) in JSON or not."""
    call: dict[str, Any] = {"name": draw(_NAMES)}
    arguments = draw(_ARGS)
    key = draw(st.sampled_from(["arguments", "parameters", "args"]))
    call[key] = json.dumps(arguments) if draw(st.booleans()) else arguments
    if draw(st.booleans()):
        call[draw(st.sampled_from(["id", "type", "function"]))] = draw(st.sampled_from(["x", "function"]))
    body = json.dumps([call, call] if draw(st.booleans()) else call)
    body = draw(st.sampled_from([body, body.replace('"', "'"), body[:-1], f"```json\n{body}\n```"]))
    space = draw(st.sampled_from(["", "\n", " \n "]))
    return f"<tool_call>{space}{body}{space}</tool_call>"


@settings(max_examples=300, deadline=None)
@given(call_blocks())
def test_a_block_taken_as_read_holds_exactly_the_calls_the_reader_reads(block: str) -> None:
    """Whatever a block holds, the calls taken from its outcome (when they are taken) equal the reader's."""
    taken = taken_as_read(block)
    if taken is not None:
        assert taken == read_alone(block)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(BLOCKS + PROSE + OTHER), max_size=12).map("".join))
def test_parse_from_blocks_equals_whole_parse(text: str) -> None:
    """Blocks mixed with reasoning, anchors, bare JSON and python calls: the same outcome as parse_tool_calls."""
    parts = parts_of(text, WEATHER)
    outcome = parse_from_blocks(
        text, normalize_tools(WEATHER), parts, tool_format="auto", reasoning_open=False, finish_reason=None,
        repair="bounded",
    )  # fmt: skip
    assert outcome == parse_tool_calls(text, WEATHER)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(BLOCKS + PROSE + OTHER), max_size=12).map("".join), st.integers(1, 7))
def test_streamed_mix_with_other_shapes_equals_whole_parse(text: str, size: int) -> None:
    """The stream's outcome of such mixes, fed in deltas of 1 to 7 characters, equals the whole-text parse."""
    assert stream(text, WEATHER, size).outcome == parse_tool_calls(text, WEATHER)


def test_blocks_are_not_decoded_again() -> None:
    """A block given with an outcome is taken from it: an outcome that disagrees with the text shows it was used."""
    text = f"(first) {BLOCKS[0]} and then {BLOCKS[0]}"
    real = parts_of(text, WEATHER)[BLOCKS[0]]
    (c,) = real.candidates
    other = Candidate(c.raw, c.span, c.format, c.stage, c.bucket, c.name, {"city": "Oslo"}, c.repairs, None, c.flags)
    parts = {BLOCKS[0]: ParseOutcome(real.calls, real.content, real.reasoning, (other,), real.stage, real.flags)}
    outcome = parse_from_blocks(
        text, normalize_tools(WEATHER), parts, tool_format="auto", reasoning_open=False, finish_reason=None,
        repair="bounded",
    )  # fmt: skip
    assert [(c.name, c.arguments, c.span) for c in outcome.candidates] == [
        ("get_weather", {"city": "Oslo"}, (8, 8 + len(BLOCKS[0]))),
        ("get_weather", {"city": "Oslo"}, (len(text) - len(BLOCKS[0]), len(text))),
    ]
    assert parse_tool_calls(text, WEATHER).calls[0].arguments == {"city": "Paris"}


_SHAPE_PIECES = [
    *BLOCKS,
    *PROSE,
    "<think>",
    "</think>",
    "plan",
    '{"name": "get_time", "arguments": {}}',
    '[{"name": "get_time", "arguments": {}}]',
    "<|python_tag|>",
    "x" * 2100,
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_SHAPE_PIECES), max_size=8),
    st.lists(st.sampled_from(_SHAPE_PIECES), max_size=8),
    st.lists(st.sampled_from(_SHAPE_PIECES), max_size=8),
    st.sampled_from(["auto", "hermes", "qwen", "json"]),
    st.booleans(),
)
def test_a_text_with_two_think_tags_is_none_of_the_common_shapes(
    a: list[str], b: list[str], c: list[str], tool_format: str, reasoning_open: bool
) -> None:
    """What parse_from_blocks relies on to skip them: the strict lane and the common shapes refuse such a text."""
    text = "".join(a) + "<think>" + "".join(b) + "<think>" + "".join(c)
    specs = normalize_tools(WEATHER)
    assert strict_outcome(text, specs, tool_format == "auto", reasoning_open) is None
    assert _find_common(text, tool_format, reasoning_open) is None
    parts = parts_of(text, WEATHER)
    options: dict[str, Any] = {"tool_format": tool_format, "reasoning_open": reasoning_open, "finish_reason": None}
    assert parse_from_blocks(text, specs, parts, repair="bounded", thinks=2, **options) == parse_tool_calls(
        text, WEATHER, tool_format=options["tool_format"], reasoning_open=reasoning_open
    )
