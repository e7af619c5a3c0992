"""The agent loop against the scripted backend and a real dispatcher (in-memory SQLite)."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tooldispatch.agent import Agent, AgentEvent, Budget, CallDispatched, RunEnded, TurnParsed
from tooldispatch.backends.base import Capabilities, ChatRequest, Event
from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.dispatch import Dispatcher, Registry
from tooldispatch.errors import BackendUnavailable, ConfigError

UNIT = {"type": "string", "enum": ["celsius", "fahrenheit"]}


def _registry(calls: list[dict[str, Any]]) -> Registry:
    reg = Registry()

    def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
        calls.append({"tool": "get_weather", "city": city, "unit": unit})
        return {"city": city, "temp": 21, "unit": unit}

    def set_thermostat(room: str, unit: str) -> dict[str, Any]:
        calls.append({"tool": "set_thermostat", "room": room, "unit": unit})
        return {"room": room, "unit": unit}

    reg.register(
        "get_weather",
        get_weather,
        description="Weather for a city",
        schema={"type": "object", "properties": {"city": {"type": "string"}, "unit": UNIT}, "required": ["city"]},
        read_only=True,
        concurrency_safe=True,
    )
    reg.register(
        "set_thermostat",
        set_thermostat,
        description="Set a room's thermostat unit",
        schema={
            "type": "object",
            "properties": {"room": {"type": "string"}, "unit": UNIT},
            "required": ["room", "unit"],
        },
        read_only=False,
    )
    return reg


def _call(name: str, **args: Any) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": args}) + "\n</tool_call>"


def test_plain_answer_ends_the_run() -> None:
    """A turn without any call is the final answer."""
    backend = ScriptedBackend([ScriptedTurn(content="It is sunny.")])
    agent = Agent(backend=backend, dispatcher=Dispatcher(_registry([])))
    run = agent.run("Weather?")
    assert run.end == "final_answer"
    assert run.final_answer == "It is sunny."
    assert len(run.turns) == 1
    assert run.tool_runs == ()


def test_no_system_message_by_default_and_a_given_one_comes_first() -> None:
    """By default the agent sends no system message (the model's template writes its own); a given system prompt
    is the first message, before the task."""
    default = ScriptedBackend([ScriptedTurn(content="ok")])
    Agent(backend=default, dispatcher=Dispatcher(_registry([]))).run("Weather?")
    given = ScriptedBackend([ScriptedTurn(content="ok")])
    Agent(backend=given, dispatcher=Dispatcher(_registry([])), system_prompt="Be brief.").run("Weather?")
    assert [dict(m) for m in default.requests[0].messages] == [{"role": "user", "content": "Weather?"}]
    assert [dict(m) for m in given.requests[0].messages] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather?"},
    ]


def test_call_is_dispatched_and_result_sent_back() -> None:
    """A parsed call runs through the dispatcher and its result goes back as a tool message."""
    calls: list[dict[str, Any]] = []
    backend = ScriptedBackend(
        [ScriptedTurn(content=_call("get_weather", city="Paris")), ScriptedTurn(content="21 degrees in Paris.")]
    )
    run = Agent(backend=backend, dispatcher=Dispatcher(_registry(calls))).run("Weather in Paris?")
    assert calls == [{"tool": "get_weather", "city": "Paris", "unit": "celsius"}]
    assert run.end == "final_answer"
    assert run.final_answer == "21 degrees in Paris."
    second = backend.requests[1].messages
    assert second[-2]["role"] == "assistant"
    assert second[-2]["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert second[-1]["role"] == "tool"
    assert second[-1]["tool_call_id"] == second[-2]["tool_calls"][0]["id"]
    assert json.loads(second[-1]["content"]) == {"city": "Paris", "temp": 21, "unit": "celsius"}


def test_tools_offered_come_from_the_registry() -> None:
    """Every request offers the registry's tools."""
    backend = ScriptedBackend([ScriptedTurn(content="ok")])
    Agent(backend=backend, dispatcher=Dispatcher(_registry([]))).run("hi")
    assert [t.name for t in backend.requests[0].tools] == ["get_weather", "set_thermostat"]


def test_read_only_tool_gets_bounded_repair() -> None:
    """A misspelled enum value is repaired for a read-only tool and the repair is recorded."""
    calls: list[dict[str, Any]] = []
    backend = ScriptedBackend(
        [ScriptedTurn(content=_call("get_weather", city="Oslo", unit="celcius")), ScriptedTurn(content="done")]
    )
    run = Agent(backend=backend, dispatcher=Dispatcher(_registry(calls))).run("Oslo?")
    assert calls == [{"tool": "get_weather", "city": "Oslo", "unit": "celsius"}]
    call = run.turns[0].outcome.calls[0]
    assert call.bucket == "repaired"
    assert [(r.kind, r.before, r.after, r.distance) for r in call.repairs] == [("enum", "celcius", "celsius", 1)]


def test_side_effecting_tool_refuses_distance_repair_and_model_is_told() -> None:
    """For a side-effecting tool an edit-distance repair becomes an error answering the call, and nothing runs."""
    calls: list[dict[str, Any]] = []
    backend = ScriptedBackend(
        [
            ScriptedTurn(content=_call("set_thermostat", room="den", unit="celcius")),
            ScriptedTurn(content=_call("set_thermostat", room="den", unit="celsius")),
            ScriptedTurn(content="Set."),
        ]
    )
    run = Agent(backend=backend, dispatcher=Dispatcher(_registry(calls))).run("Set the den to celsius")
    assert calls == [{"tool": "set_thermostat", "room": "den", "unit": "celsius"}]
    first = run.turns[0]
    assert first.outcome.calls == ()
    assert first.outcome.rejected[0].bucket == "SchemaMismatch"
    assert first.feedback is not None
    assert "celsius" in first.feedback and "fahrenheit" in first.feedback
    sent = backend.requests[1].messages
    refused_id = sent[-2]["tool_calls"][0]["id"]
    assert re.fullmatch(r"call_[0-9a-f]{16}", refused_id)
    assert json.loads(sent[-2]["tool_calls"][0]["function"]["arguments"]) == {"room": "den", "unit": "celcius"}
    assert sent[-1] == {
        "role": "tool",
        "tool_call_id": refused_id,
        "name": "set_thermostat",
        "content": first.feedback,
    }
    assert run.end == "final_answer"


def test_native_calls_are_repaired_and_dispatched() -> None:
    """Server-extracted calls with Python-ish argument strings go through the same decoding."""
    calls: list[dict[str, Any]] = []
    backend = ScriptedBackend(
        [
            ScriptedTurn(tool_calls=[{"name": "get_weather", "arguments": "{'city': 'Rome',}"}]),
            ScriptedTurn(content="Sunny in Rome."),
        ],
        native_tools=True,
    )
    run = Agent(backend=backend, dispatcher=Dispatcher(_registry(calls))).run("Rome?")
    assert calls == [{"tool": "get_weather", "city": "Rome", "unit": "celsius"}]
    assert run.turns[0].outcome.calls[0].id == "call_0"


def test_turn_budget_ends_the_run() -> None:
    """A model that never stops calling tools is ended by max_turns, reported as such (with the repeat guard and
    the stuck detector off: each would end this run earlier)."""
    backend = ScriptedBackend(lambda request: ScriptedTurn(content=_call("get_weather", city="Paris")))
    budget = Budget(max_turns=3, stuck_repeats=None, stuck_idle_turns=None)
    run = Agent(backend=backend, dispatcher=Dispatcher(_registry([])), budget=budget, repeat_guard=False).run("loop")
    assert run.end == "max_turns"
    assert len(run.turns) == 3
    assert run.final_answer is None


def test_token_budget_ends_the_run() -> None:
    """Completion tokens are counted across turns and end the run when the budget is spent."""
    backend = ScriptedBackend(lambda request: ScriptedTurn(content=_call("get_weather", city="Paris") * 3))
    run = Agent(backend=backend, dispatcher=Dispatcher(_registry([])), budget=Budget(max_turns=10, max_tokens=50)).run(
        "loop"
    )
    assert run.end == "max_tokens"
    assert len(run.turns) == 1


class _DeadBackend:
    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(engine="dead")

    async def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
        raise BackendUnavailable("connection refused at http://127.0.0.1:9/v1")
        yield  # pragma: no cover


def test_backend_error_ends_the_run_with_its_message() -> None:
    """A failing engine ends the run as backend_error with the message, instead of raising."""
    run = Agent(backend=_DeadBackend(), dispatcher=Dispatcher(_registry([]))).run("hi")
    assert run.end == "backend_error"
    assert run.error == "connection refused at http://127.0.0.1:9/v1"


def test_observer_sees_parse_dispatch_and_end() -> None:
    """The observer receives the parsed outcome, each dispatched call, and the end of the run."""
    seen: list[AgentEvent] = []
    backend = ScriptedBackend([ScriptedTurn(content=_call("get_weather", city="Lima")), ScriptedTurn(content="ok")])
    Agent(backend=backend, dispatcher=Dispatcher(_registry([])), observer=seen.append).run("Lima?")
    kinds = [type(e).__name__ for e in seen if not type(e).__name__.startswith(("ModelStreamed", "TurnStarted"))]
    assert kinds == ["TurnParsed", "CallDispatched", "TurnParsed", "RunEnded"]
    dispatched = [e for e in seen if isinstance(e, CallDispatched)]
    assert dispatched[0].run.result.status == "ok"
    assert isinstance(seen[-1], RunEnded)
    assert isinstance(next(e for e in seen if isinstance(e, TurnParsed)).outcome.calls[0].name, str)


def test_sync_run_works_inside_a_running_loop() -> None:
    """``Agent.run`` called from a coroutine's thread runs in a worker thread instead of failing."""
    backend = ScriptedBackend([ScriptedTurn(content="fine")])
    agent = Agent(backend=backend, dispatcher=Dispatcher(_registry([])))

    async def main() -> str | None:
        return agent.run("hi").final_answer

    assert asyncio.run(main()) == "fine"


def test_reasoning_time_never_counts_against_a_tool_timeout() -> None:
    """A model that reasons for 2 s then calls a tool with a 1 s budget taking 0.5 s: the tool succeeds.

    The trace shows reasoning time and tool time apart.
    """
    reg = Registry()

    def slow_lookup(key: str) -> dict[str, str]:
        time.sleep(0.5)
        return {"key": key}

    reg.register(
        "slow_lookup",
        slow_lookup,
        description="A lookup that takes half a second",
        schema={"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
        read_only=True,
        timeout_s=1.0,
    )
    backend = ScriptedBackend(
        [
            ScriptedTurn(
                reasoning="Let me think about which key to use.", reasoning_s=2.0, content=_call("slow_lookup", key="a")
            ),
            ScriptedTurn(content="found a"),
        ]
    )
    run = Agent(backend=backend, dispatcher=Dispatcher(reg)).run("Look up a")
    result = run.tool_runs[0].result
    assert result.status == "ok"
    assert json.loads(result.content) == {"key": "a"}
    latencies = result.trace.latencies
    assert latencies["reasoning"] >= 2.0
    assert 0.5 <= latencies["tool"] < latencies["reasoning"]
    assert run.turns[0].reasoning_s >= 2.0


def test_call_inside_split_reasoning_is_recovered() -> None:
    """A call the engine left in its reasoning field is still found, flagged in_reasoning, and dispatched."""
    calls: list[dict[str, Any]] = []
    backend = ScriptedBackend(
        [
            ScriptedTurn(reasoning="I will call " + _call("get_weather", city="Lima"), content=""),
            ScriptedTurn(content="Lima is warm."),
        ]
    )
    run = Agent(backend=backend, dispatcher=Dispatcher(_registry(calls))).run("Lima?")
    assert calls == [{"tool": "get_weather", "city": "Lima", "unit": "celsius"}]
    call = run.turns[0].outcome.calls[0]
    assert call.flags == frozenset({"in_reasoning"})
    assert run.turns[0].outcome.reasoning.startswith("I will call")


def test_read_only_calls_start_before_the_turn_ends() -> None:
    """A read-only, concurrency-safe call complete in the stream is dispatched early; a side-effecting one waits."""
    calls: list[dict[str, Any]] = []
    content = _call("get_weather", city="Oslo") + "\n" + _call("set_thermostat", room="den", unit="celsius")
    backend = ScriptedBackend([ScriptedTurn(content=content, chunk=3), ScriptedTurn(content="done")])
    run = Agent(backend=backend, dispatcher=Dispatcher(_registry(calls))).run("both")
    assert [c["tool"] for c in calls] == ["get_weather", "set_thermostat"]
    triggers = [r.result.trace.trigger for r in run.tool_runs]
    assert triggers == ["model_turn:0:early", "model_turn:0"]
    assert [r.result.status for r in run.tool_runs] == ["ok", "ok"]


def test_early_dispatch_can_be_turned_off() -> None:
    """With early_dispatch=False every call waits for the end of the turn."""
    backend = ScriptedBackend([ScriptedTurn(content=_call("get_weather", city="Oslo")), ScriptedTurn(content="ok")])
    run = Agent(backend=backend, dispatcher=Dispatcher(_registry([])), early_dispatch=False).run("x")
    assert [r.result.trace.trigger for r in run.tool_runs] == ["model_turn:0"]


def test_parser_repairs_reach_the_dispatch_trace() -> None:
    """A call the parser repaired carries its repairs into the dispatcher's trace."""
    backend = ScriptedBackend(
        [ScriptedTurn(content=_call("get_weather", city="Oslo", unit="celcius")), ScriptedTurn(content="ok")]
    )
    run = Agent(backend=backend, dispatcher=Dispatcher(_registry([])), early_dispatch=False).run("Oslo?")
    trace = run.tool_runs[0].result.trace.to_dict()
    assert [(r["kind"], r["before"], r["after"]) for r in trace["repairs"]] == [("enum", "celcius", "celsius")]


def test_agent_builds_its_dispatcher_from_a_registry_and_store(tmp_path: Any) -> None:
    """``Agent(registry=..., store=...)`` makes a dispatcher on that SQLite file; its traces land there."""
    calls: list[dict[str, Any]] = []
    backend = ScriptedBackend([ScriptedTurn(content=_call("get_weather", city="Kyiv")), ScriptedTurn(content="ok")])
    agent = Agent(backend=backend, registry=_registry(calls), store=tmp_path / "state.db")
    run = agent.run("Kyiv?")
    assert calls == [{"tool": "get_weather", "city": "Kyiv", "unit": "celsius"}]
    assert [t.tool for t in agent.dispatcher.traces()] == ["get_weather"]
    assert run.end == "final_answer"
    assert (tmp_path / "state.db").exists()


def test_agent_without_dispatcher_or_registry_is_a_config_error() -> None:
    """Neither a dispatcher nor a registry: a ConfigError that says what to pass."""
    with pytest.raises(ConfigError, match="dispatcher= or a registry="):
        Agent(backend=ScriptedBackend([]))


def _effects_registry(effects: list[int], delay_s: float) -> Registry:
    reg = Registry()

    def record(n: int) -> dict[str, Any]:
        time.sleep(delay_s)
        effects.append(n)
        return {"recorded": n}

    reg.register(
        "record",
        record,
        description="Record a number",
        schema={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        read_only=False,
    )
    return reg


def test_fault11_wall_budget_bounds_dispatch_inside_a_turn() -> None:
    """Fault 11: 100 side-effecting calls of 60 ms in one turn under Budget(max_wall_s=1): calls run in order
    until the budget ends, the next ones up to the per-turn cap (32) are reported as not run, the rest as over
    the cap, none of those ran, and the run ends as wall_time."""
    effects: list[int] = []
    text = "".join(_call("record", n=i) for i in range(100))
    backend = ScriptedBackend([ScriptedTurn(content=text), ScriptedTurn(content="done")])
    agent = Agent(
        backend=backend,
        dispatcher=Dispatcher(_effects_registry(effects, 0.06)),
        budget=Budget(max_wall_s=1.0),
    )
    run = agent.run("Record 100 numbers.")
    assert run.end == "wall_time"
    runs = run.tool_runs
    assert len(runs) == 100
    ran = [r for r in runs if r.result.status == "ok"]
    assert 0 < len(ran) < 32
    assert effects == list(range(len(ran)))
    assert runs[: len(ran)] == tuple(ran)  # calls run in order until the budget ends
    reasons = [(r.result.status, r.result.reason) for r in runs[len(ran) :]]
    assert reasons == [("rejected", "not_run")] * (32 - len(ran)) + [("rejected", "too_many_calls")] * 68
    envelope = json.loads(runs[len(ran)].result.content)
    assert envelope["message"] == "the run's wall-time budget (1 s) ended before this call started; it was not run"
    assert envelope["recoverable"] is True


def test_fault11_calls_per_turn_are_capped() -> None:
    """Fault 11: a turn with 40 calls runs the first 32 (the default cap); the other 8 are rejected, not run,
    with feedback saying how many run per turn."""
    effects: list[int] = []
    text = "".join(_call("record", n=i) for i in range(40))
    backend = ScriptedBackend([ScriptedTurn(content=text), ScriptedTurn(content="done")])
    run = Agent(backend=backend, dispatcher=Dispatcher(_effects_registry(effects, 0.0))).run("Record 40 numbers.")
    assert run.end == "final_answer"
    assert effects == list(range(32))
    statuses = [(r.result.status, r.result.reason) for r in run.tool_runs]
    assert statuses == [("ok", None)] * 32 + [("rejected", "too_many_calls")] * 8
    envelope = json.loads(run.tool_runs[32].result.content)
    assert envelope["message"] == (
        "this turn made 40 calls; at most 32 run in one turn, so calls 33 to 40 were not run"
    )
    assert envelope["suggestion"] == "call again with the calls still needed, at most 32 per turn"
