"""SseTurn: what goes out after each upstream event, and that a stream answers the calls a whole answer does."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from tooldispatch.backends.base import (
    Completion,
    ContentDelta,
    Event,
    Finish,
    NativeCall,
    ReasoningDelta,
    ReasoningEnd,
    ToolCallDelta,
    Usage,
)
from tooldispatch.policy import ToolPolicy
from tooldispatch.proxy.stats import RequestStats
from tooldispatch.proxy.stream import SseTurn
from tooldispatch.proxy.translate import Limits, ProxyRequest, ToolCache, read_request
from tooldispatch.proxy.turn import answered, outcome_of, with_rejected

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
        },
    },
}
TIME = {
    "type": "function",
    "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}},
}
PARIS = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'


def request(*, policy: ToolPolicy | None = None, **body: Any) -> ProxyRequest:
    """A streamed request with the weather and time tools, declared read-only (the proxy's --policy)."""
    base: dict[str, Any] = {"messages": [{"role": "user", "content": "hi"}], "tools": [WEATHER, TIME], "stream": True}
    cache = ToolCache(policy=policy if policy is not None else ToolPolicy.read_only(why="test"))
    return read_request({**base, **body}, limits=Limits(), constrained=False, tool_cache=cache)


def new_turn(req: ProxyRequest | None = None) -> SseTurn:
    """An SseTurn for ``req`` (the default streamed request)."""
    req = req or request()
    stats = RequestStats(
        id="r", model="m", quant="q", engine="e", mode="client", stream=True, tools=2, tool_choice="auto"
    )
    return SseTurn(req, "m", stats)


def deltas(chunks: Sequence[bytes]) -> list[dict[str, Any]]:
    """The ``delta`` objects of SSE chunks (``[DONE]`` and usage chunks skipped)."""
    out = []
    for chunk in chunks:
        assert chunk.startswith(b"data: ") and chunk.endswith(b"\n\n")
        if chunk == b"data: [DONE]\n\n":
            continue
        data = json.loads(chunk[6:])
        if data["choices"]:
            out.append(data["choices"][0]["delta"])
    return out


def calls_in(chunks: Sequence[bytes]) -> list[tuple[str, dict[str, Any]]]:
    """The (name, arguments) of every tool_calls delta, in order."""
    return [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for d in deltas(chunks)
        for c in d.get("tool_calls", [])
    ]


def test_content_goes_out_as_it_arrives() -> None:
    """Plain content deltas go out at once, each as its own chunk."""
    turn = new_turn()
    assert deltas(turn.feed(ContentDelta("The weather "))) == [{"content": "The weather "}]
    assert deltas(turn.feed(ContentDelta("is fine."))) == [{"content": "is fine."}]


def test_call_prefix_is_held_and_the_call_goes_out_when_complete() -> None:
    """A possible call prefix is held; the call goes out as one tool_calls delta as soon as its tag closes."""
    turn = new_turn()
    assert deltas(turn.feed(ContentDelta("Sure. <tool_"))) == [{"content": "Sure. "}]
    assert turn.feed(ContentDelta('call>{"name": "get_weather", "arguments": {"city": "Paris"}}')) == []
    sent = deltas(turn.feed(ContentDelta("</tool_call>")))
    assert len(sent) == 1
    call = sent[0]["tool_calls"][0]
    assert call["index"] == 0 and call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    closing = deltas(turn.close())
    assert closing == [{}]  # the final chunk; its finish reason is checked below


def test_finish_reason_is_tool_calls_and_usage_comes_when_asked() -> None:
    """The last chunks: finish_reason tool_calls after a call, a usage chunk when asked, then [DONE]."""
    turn = new_turn(request(stream_options={"include_usage": True}))
    turn.feed(ContentDelta(PARIS))
    turn.feed(Usage(prompt_tokens=12, completion_tokens=8))
    turn.feed(Finish("stop"))
    out = turn.close()
    assert json.loads(out[0][6:])["choices"][0]["finish_reason"] == "tool_calls"
    usage = json.loads(out[1][6:])
    assert usage["choices"] == [] and usage["usage"] == {
        "prompt_tokens": 12,
        "completion_tokens": 8,
        "total_tokens": 20,
    }
    assert out[2] == b"data: [DONE]\n\n"


def test_end_of_reasoning_is_visible_while_the_call_after_it_is_held() -> None:
    """Reasoning streams in both fields; its end goes out at once as an empty content delta, before the held call."""
    turn = new_turn()
    assert deltas(turn.feed(ReasoningDelta("Paris, so "))) == [
        {"reasoning_content": "Paris, so ", "reasoning": "Paris, so "}
    ]
    assert deltas(turn.feed(ReasoningEnd())) == [{"content": ""}]
    assert turn.feed(ContentDelta('<tool_call>{"name": "get_weather"')) == []
    assert calls_in(turn.feed(ContentDelta(', "arguments": {"city": "Paris"}}</tool_call>'))) == [
        ("get_weather", {"city": "Paris"})
    ]


def test_reasoning_written_in_the_content_streams_as_reasoning() -> None:
    """A <think> block in the content goes out as reasoning deltas, and its end as an empty content delta."""
    turn = new_turn()
    out = deltas(turn.feed(ContentDelta("<think>let me see</think>")))
    assert out == [{"reasoning_content": "let me see", "reasoning": "let me see"}, {"content": ""}]


def test_upstream_calls_go_out_when_the_next_one_starts() -> None:
    """Server mode: a native call goes out repaired as soon as the next call starts; the last one at the end."""
    turn = new_turn()
    assert turn.feed(ToolCallDelta(0, id="up_0", name="get_weather", arguments='{"city": "Pa')) == []
    assert turn.feed(ToolCallDelta(0, arguments='ris", "unit": "CELSIUS"}')) == []
    first = turn.feed(ToolCallDelta(1, id="up_1", name="get_time", arguments='{"tz": "CET"}'))
    assert calls_in(first) == [("get_weather", {"city": "Paris", "unit": "celsius"})]
    turn.feed(Finish("tool_calls"))
    assert calls_in(turn.close()) == [("get_time", {"tz": "CET"})]


def test_parallel_tool_calls_false_streams_one_call() -> None:
    """With parallel_tool_calls false the stream carries only the first call."""
    turn = new_turn(request(parallel_tool_calls=False))
    out = turn.feed(ContentDelta(PARIS + PARIS.replace("Paris", "Lyon")))
    out += turn.close()
    assert calls_in(out) == [("get_weather", {"city": "Paris"})]


def test_bare_json_call_in_content_becomes_a_tool_call() -> None:
    """vLLM's hermes parser leaves a call without tags in the content: the stream still answers it as a call."""
    turn = new_turn()
    out = turn.feed(ContentDelta('{"name": "get_weather", "arguments": {"city": "Paris"}}'))
    out += turn.close()
    assert calls_in(out) == [("get_weather", {"city": "Paris"})]
    assert all(d.get("content", "") == "" for d in deltas(out))


def _events(content: Sequence[str], reasoning: str, natives: Sequence[NativeCall], reason: str) -> list[Event]:
    events: list[Event] = []
    if reasoning:
        events += [ReasoningDelta(reasoning[:5]), ReasoningDelta(reasoning[5:]), ReasoningEnd()]
    events += [ContentDelta(c) for c in content]
    for i, call in enumerate(natives):
        half = len(call.arguments) // 2
        events += [
            ToolCallDelta(i, id=call.id, name=call.name, arguments=call.arguments[:half]),
            ToolCallDelta(i, arguments=call.arguments[half:]),
        ]
    return [*events, Finish(reason)]


CASES: list[tuple[str, list[str], str, list[NativeCall], str]] = [
    ("hermes in prose", ["Sure. ", PARIS[:20], PARIS[20:], " done"], "", [], "stop"),
    ("two hermes calls", [PARIS, "\n", PARIS.replace("Paris", "Lyon")], "", [], "stop"),
    (
        "call in reasoning only",
        ["I will check."],
        'call <tool_call>{"name": "get_time", "arguments": {}}</tool_call>',
        [],
        "stop",
    ),
    ("bare json", ['{"name": "get_weather", ', '"arguments": {"city": "Oslo"}}'], "thinking", [], "stop"),
    ("pythonic list", ['[get_weather(city="Rome"), ', 'get_time(tz="CET")]'], "", [], "stop"),
    ("mistral", ['[TOOL_CALLS][{"name": "get_time", "arguments": {"tz": "UTC"}}]'], "", [], "stop"),
    (
        "single quotes",
        ["<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Nice'}}</tool_call>"],
        "",
        [],
        "stop",
    ),
    (
        "misspelled name",
        ['<tool_call>{"name": "get_wether", "arguments": {"city": "Bern"}}</tool_call>'],
        "",
        [],
        "stop",
    ),
    ("cut off", ['<tool_call>{"name": "get_weather", "arguments": {"city": "Par'], "", [], "length"),
    ("unknown tool", ['<tool_call>{"name": "launch", "arguments": {}}</tool_call>'], "", [], "stop"),
    ("no call", ["Just text, ", "with {braces} and <tags>."], "hmm", [], "stop"),
    (
        "natives",
        [""],
        "",
        [NativeCall("a", "get_weather", '{"city": "Paris"}'), NativeCall("b", "get_time", "{'tz': 'CET',}")],
        "tool_calls",
    ),
    (
        "native and bare json",
        ['{"name": "get_time", "arguments": {"tz": "UTC"}}'],
        "",
        [NativeCall("a", "get_weather", '{"city": "Oslo"}')],
        "tool_calls",
    ),
]


@pytest.mark.parametrize(
    ("content", "reasoning", "natives", "reason"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_streamed_and_whole_answers_carry_the_same_calls(
    content: list[str], reasoning: str, natives: list[NativeCall], reason: str
) -> None:
    """For each output shape, the stream answers exactly the calls, content (up to whitespace) and finish reason of
    the non-streamed path."""
    req = request()
    turn = new_turn(req)
    out: list[bytes] = []
    for event in _events(content, reasoning, natives, reason):
        out += turn.feed(event)
    out += turn.close()
    completion = Completion(
        content="".join(content),
        reasoning=reasoning,
        native_calls=tuple(natives),
        finish_reason=reason,
        usage=None,
        started=0.0,
        first_token_t=None,
        reasoning_start_t=None,
        reasoning_end_t=None,
        finished_t=0.0,
    )
    outcome = outcome_of(req, completion)
    whole = answered(req, outcome.calls)
    streamed, expected = calls_in(out), [(c.name, c.arguments) for c in whole]
    content = "".join(d.get("content") or "" for d in deltas(out))
    expected_content = outcome.content if whole else with_rejected(outcome.content, outcome)
    assert content.split() == expected_content.split()
    if natives and "".join(content):
        # The stream sends calls in the order they completed; the whole answer lists the upstream's calls first.
        streamed, expected = sorted(streamed, key=repr), sorted(expected, key=repr)
    assert streamed == expected
    final = json.loads(out[-2][6:])["choices"][0]["finish_reason"]
    assert final == ("length" if reason == "length" else "tool_calls" if whole else reason)


def test_an_undeclared_tools_call_goes_out_at_the_end_of_the_stream() -> None:
    """Without a policy the tool is side-effecting: what follows its call decides, so the call goes out at close."""
    turn = new_turn(request(policy=ToolPolicy()))
    assert deltas(turn.feed(ContentDelta("Sure. <tool_"))) == [{"content": "Sure. "}]
    assert turn.feed(ContentDelta('call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>')) == []
    turn.feed(Finish("stop"))
    assert calls_in(turn.close()) == [("get_weather", {"city": "Paris"})]
