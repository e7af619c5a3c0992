"""No hidden state: parses run from many threads at once give each input its single-threaded outcome."""

from __future__ import annotations

import random
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tooldispatch.bench.parser import Record, load_corpus
from tooldispatch.parsing import lane
from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.parsing.stream import StreamParser
from tooldispatch.toolspec import ToolSpec
from tooldispatch.types import ParseOutcome

CORPUS = Path(__file__).parents[2] / "fixtures" / "corpus"
THREADS = 8


def _inputs() -> list[tuple[Record, str]]:
    """Every corpus record, and a malformed variant of each (the texts that sent values between stages)."""
    rng = random.Random(15)
    out: list[tuple[Record, str]] = []
    for record in load_corpus(CORPUS):
        out.append((record, record.text))
        cut = rng.randrange(len(record.text) + 1) if record.text else 0
        out.append((record, record.text[:cut] + "'," + record.text[cut:]))
        out.append((record, record.text.replace('"', "'", 3)))
    return out


def _parse(item: tuple[Record, str], strict_lane: bool = True) -> ParseOutcome:
    record, text = item
    return parse_tool_calls(
        text,
        record.tools,
        native_calls=record.native_calls,
        finish_reason=record.finish_reason,
        reasoning_open=record.reasoning_open,
        strict_lane=strict_lane,
    )


def _streamed(item: tuple[Record, str]) -> ParseOutcome | None:
    record, text = item
    parser = StreamParser(record.tools, reasoning_open=record.reasoning_open)
    for i in range(0, len(text), 7):
        parser.feed(text[i : i + 7])
    parser.close(record.finish_reason)
    return parser.outcome


def test_eight_threads_give_every_input_its_single_threaded_outcome() -> None:
    """Many different inputs parsed at once from 8 threads (each input several times, interleaved) match one by one."""
    items = _inputs()
    assert len(items) > 600
    alone = [_parse(item) for item in items]
    order = list(range(len(items))) * 3
    random.Random(8).shuffle(order)
    with ThreadPoolExecutor(THREADS) as pool:
        together = list(pool.map(lambda i: (i, _parse(items[i])), order))
    assert [outcome for i, outcome in together] == [alone[i] for i, _ in together]


def test_eight_threads_of_streams_and_whole_parses_interleaved_match() -> None:
    """Stream parsers and whole-text parses of different inputs, run together from 8 threads, match their runs alone."""
    items = _inputs()[:240]
    alone: list[Any] = [(_parse(item), _streamed(item)) for item in items]
    with ThreadPoolExecutor(THREADS) as pool:
        together = list(pool.map(lambda item: (_parse(item), _streamed(item)), items))
    assert together == alone


def test_the_strict_lane_switch_turns_the_lane_off() -> None:
    """strict_lane=False never enters the lane (it compiles no check of its own); the default does, same outcome."""
    name = f"probe_{uuid.uuid4().hex}"
    tools = [ToolSpec(name, parameters={"type": "object", "properties": {"x": {"type": "integer"}}})]
    text = f'<tool_call>{{"name": "{name}", "arguments": {{"x": 1}}}}</tool_call>'
    off = parse_tool_calls(text, tools, strict_lane=False)
    assert name not in lane._checks
    on = parse_tool_calls(text, tools)
    assert name in lane._checks
    assert on == off
    assert [(c.name, c.arguments, c.bucket) for c in on.calls] == [(name, {"x": 1}, "ok_strict")]
