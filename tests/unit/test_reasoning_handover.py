"""The agent, the proxy and the benchmark hand the split-off reasoning to the parser one way, and agree on it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tooldispatch.agent import Agent, Budget
from tooldispatch.backends.base import Completion, ContentDelta, Event, Finish, ReasoningDelta, ReasoningEnd
from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.bench.bfcl_data import BfclCase
from tooldispatch.bench.corpus import OutputRecord
from tooldispatch.bench.scoring import score_output
from tooldispatch.dispatch import Dispatcher, Registry
from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.policy import ToolPolicy
from tooldispatch.proxy.stats import RequestStats
from tooldispatch.proxy.stream import SseTurn
from tooldispatch.proxy.translate import Limits, ToolCache, read_request
from tooldispatch.proxy.turn import outcome_of
from tooldispatch.types import ParseOutcome

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
PARIS = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
LYON = '<tool_call>{"name": "get_weather", "arguments": {"city": "Lyon"}}</tool_call>'

Answer = tuple[tuple[tuple[str, str | None, str, tuple[str, ...]], ...], tuple[str, ...]]


def _answer(outcome: ParseOutcome) -> Answer:
    """Every candidate's bucket, name, arguments and flags, and the outcome's flags."""
    candidates = tuple(
        (c.bucket, c.name, json.dumps(c.arguments, sort_keys=True), tuple(sorted(c.flags))) for c in outcome.candidates
    )
    return candidates, tuple(sorted(outcome.flags))


def _agent(content: str, reasoning: str) -> ParseOutcome:
    registry = Registry()
    registry.register("get_weather", lambda city: {"city": city}, description="Weather", schema=SCHEMA, read_only=True)
    agent = Agent(
        backend=ScriptedBackend([ScriptedTurn(content=content, reasoning=reasoning, chunk=5)]),
        dispatcher=Dispatcher(registry),
        budget=Budget(max_turns=1),
    )
    return agent.run("Weather in Paris?").turns[0].outcome


def _request() -> Any:
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}}
    body = {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": [tool], "stream": True}
    cache = ToolCache(policy=ToolPolicy.read_only(why="test"))
    return read_request(body, limits=Limits(), constrained=False, tool_cache=cache)


def _proxy_whole(content: str, reasoning: str) -> ParseOutcome:
    completion = Completion(
        content=content,
        reasoning=reasoning,
        native_calls=(),
        finish_reason="stop",
        usage=None,
        started=0.0,
        first_token_t=None,
        reasoning_start_t=None,
        reasoning_end_t=None,
        finished_t=0.0,
    )
    return outcome_of(_request(), completion)


def _proxy_streamed(content: str, reasoning: str) -> tuple[dict[str, int], str]:
    stats = RequestStats(
        id="r", model="m", quant="q", engine="e", mode="client", stream=True, tools=1, tool_choice="auto"
    )
    turn = SseTurn(_request(), "m", stats)
    events: list[Event] = [ReasoningDelta(reasoning[i : i + 5]) for i in range(0, len(reasoning), 5)]
    events += [ReasoningEnd(), *(ContentDelta(content[i : i + 5]) for i in range(0, len(content), 5)), Finish("stop")]
    for event in events:
        turn.feed(event)
    turn.close()
    return stats.buckets, stats.flags


def _benchmark(content: str, reasoning: str) -> ParseOutcome:
    function = {"name": "get_weather", "parameters": {**SCHEMA, "type": "dict"}}
    case = BfclCase(
        id="simple_0",
        category="simple",
        messages=({"role": "user", "content": "Weather in Paris?"},),
        functions=(function,),
        ground_truth=({"get_weather": {"city": ["Paris"]}},),
    )
    record = OutputRecord(
        cell="c", case_id=case.id, seed=0, case=case.to_dict(), model="m", quant="q", text=content,
        reasoning=reasoning, finish_reason="stop",
    )  # fmt: skip
    outcomes: list[ParseOutcome] = []

    def parse(*args: Any, **kwargs: Any) -> ParseOutcome:
        outcomes.append(parse_tool_calls(*args, **kwargs))
        return outcomes[-1]

    scored = score_output(record, parse=parse)
    full = outcomes[1]  # the full cascade, each tool at its own level
    assert scored.in_reasoning == ("in_reasoning" in full.flags)
    return full


def _ok(city: str, *flags: str) -> tuple[str, str, str, tuple[str, ...]]:
    return ("ok_strict", "get_weather", json.dumps({"city": city}), flags)


@pytest.mark.parametrize(
    ("content", "reasoning", "expected"),
    [
        ("Let me check.", f"I will call {PARIS}", ((_ok("Paris", "in_reasoning"),), ("in_reasoning",))),
        (LYON, f"Maybe {PARIS}", ((_ok("Lyon"),), ())),
        ("It is sunny.", "No tool is needed.", ((), ("no_call",))),
        (
            "",
            f"A closer </think> written in the reasoning, then {PARIS}",
            ((_ok("Paris", "in_reasoning"),), ("in_reasoning",)),
        ),
    ],
    ids=["call in reasoning only", "calls on both sides", "no call", "a closer inside the reasoning"],
)
def test_agent_proxy_and_benchmark_read_one_output_alike(content: str, reasoning: str, expected: Answer) -> None:
    """The agent, the proxy (whole and streamed) and the benchmark's scoring flag the same calls in reasoning."""
    agent = _answer(_agent(content, reasoning))
    whole = _answer(_proxy_whole(content, reasoning))
    bench = _answer(_benchmark(content, reasoning))
    assert agent == whole == bench == expected
    buckets: dict[str, int] = {}
    for bucket, *_ in expected[0]:
        buckets[bucket] = buckets.get(bucket, 0) + 1
    assert _proxy_streamed(content, reasoning) == (buckets, ",".join(expected[1]))
