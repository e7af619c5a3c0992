"""The stuck detector: a run that makes no progress ends as ``stuck``, with the evidence, after a few turns."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tooldispatch.agent import Agent, Budget, Stuck
from tooldispatch.backends.base import ChatRequest
from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.cli.exits import STUCK, exit_code
from tooldispatch.dispatch import Dispatcher, Registry
from tooldispatch.errors import ConfigError


def _call(name: str, **args: Any) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def _registry(log: list[dict[str, Any]]) -> Registry:
    reg = Registry()
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }

    def get_weather(city: str) -> dict[str, Any]:
        log.append({"city": city})
        return {"city": city, "sky": "sunny"}

    def lookup(city: str) -> dict[str, Any]:
        raise RuntimeError(f"no data for {city}")

    reg.register("get_weather", get_weather, description="Weather", schema=schema, read_only=True)
    reg.register("lookup", lookup, description="Lookup", schema=schema, read_only=True, max_attempts=1)
    reg.register("job_status", lambda city: {"state": "running"}, description="Poll", schema=schema, read_only=True)
    return reg


def _agent(script: Any, log: list[dict[str, Any]], **kwargs: Any) -> Agent:
    kwargs.setdefault("budget", Budget(max_turns=8))
    return Agent(backend=ScriptedBackend(script), dispatcher=Dispatcher(_registry(log)), **kwargs)


def test_the_same_refused_call_three_turns_running_ends_the_run_as_stuck() -> None:
    """The same call refused for its arguments in turns 1-3 ends the run after turn 3 as same_rejection, exit 6."""
    bad = _call("get_weather", town="Paris")
    run = _agent(lambda request: ScriptedTurn(content=bad), []).run("Weather?")
    assert run.end == "stuck"
    assert len(run.turns) == 3
    assert run.stuck == Stuck(
        "same_rejection",
        (0, 1, 2),
        bad + ' (refused: get_weather: invalid arguments: /: missing required argument "city"; declared: city; '
        '/: unknown argument(s) "town"; declared: city)',
    )
    assert run.final_answer is None
    assert exit_code(run) == STUCK == 6


def test_the_same_unusable_text_three_turns_running_is_same_output() -> None:
    """A call attempt naming no tool, written identically three turns running, ends the run as same_output."""
    text = '<tool_call>{"name": get_weather}</tool_call>'
    run = _agent(lambda request: ScriptedTurn(content=text), []).run("Weather?")
    assert run.end == "stuck"
    assert run.stuck == Stuck("same_output", (0, 1, 2), text)
    assert run.to_dict()["stuck"] == {"kind": "same_output", "turns": [0, 1, 2], "what": text}
    assert run.summary()["stuck"] == f"same_output in turns 1, 2, 3: {text}"


def test_the_same_calls_with_the_same_results_are_same_calls() -> None:
    """With the repeat guard off, the same successful call three turns running ends the run as same_calls."""
    log: list[dict[str, Any]] = []
    run = _agent(lambda request: ScriptedTurn(content=_call("get_weather", city="Paris")), log, repeat_guard=False)
    result = run.run("Weather?")
    assert result.end == "stuck"
    assert result.stuck == Stuck("same_calls", (0, 1, 2), '["get_weather", {"city": "Paris"}] -> ok')
    assert len(log) == 3


def test_turns_without_a_new_successful_call_are_no_new_success() -> None:
    """Four turns whose calls all fail, each with other arguments, end the run as no_new_success."""
    cities = iter(["A", "B", "C", "D", "E"])
    run = _agent(lambda request: ScriptedTurn(content=_call("lookup", city=next(cities))), []).run("Find it")
    assert run.end == "stuck"
    assert run.stuck == Stuck("no_new_success", (0, 1, 2, 3), "4 turns without a new successful call")
    assert [r.result.status for r in run.tool_runs] == ["error"] * 4


def test_switched_off_the_run_goes_to_its_turn_budget() -> None:
    """With both thresholds None the repeating run ends at max_turns, not as stuck."""
    bad = _call("get_weather", town="Paris")
    budget = Budget(max_turns=5, stuck_repeats=None, stuck_idle_turns=None)
    run = _agent(lambda request: ScriptedTurn(content=bad), [], budget=budget).run("Weather?")
    assert (run.end, len(run.turns), run.stuck) == ("max_turns", 5, None)


def test_a_progressing_run_is_not_stuck() -> None:
    """New successful calls each turn, then an answer: the run ends with its final answer."""

    def script(request: ChatRequest) -> ScriptedTurn:
        done = sum(1 for m in request.messages if m["role"] == "tool")
        return ScriptedTurn(content=_call("get_weather", city=f"C{done}") if done < 5 else "All sunny.")

    run = _agent(script, []).run("Weather in five cities?")
    assert (run.end, run.final_answer, len(run.turns)) == ("final_answer", "All sunny.", 6)


def test_a_declared_polling_tool_is_never_a_stuck_repeat() -> None:
    """Polling the same status with the same result is not stuck when the tool is declared in polling_tools."""
    poll = _call("job_status", city="Paris")
    run = _agent(lambda request: ScriptedTurn(content=poll), [], polling_tools=("job_status",)).run("Wait")
    assert (run.end, len(run.turns), run.stuck) == ("max_turns", 8, None)


def test_budget_rejects_thresholds_that_end_every_run() -> None:
    """stuck_repeats below 2 and stuck_idle_turns below 1 are configuration errors that say what to use."""
    with pytest.raises(ConfigError, match="stuck_repeats must be at least 2"):
        Budget(stuck_repeats=1)
    with pytest.raises(ConfigError, match="stuck_idle_turns must be at least 1"):
        Budget(stuck_idle_turns=0)


def test_logs_show_the_stuck_evidence() -> None:
    """`tooldispatch logs RUN` prints the stuck kind, its turns (1-based) and what repeated, after the counts."""
    from tooldispatch.cli.home import _show
    from tooldispatch.runlog import record_of

    bad = _call("get_weather", town="Paris")
    run = _agent(lambda request: ScriptedTurn(content=bad), []).run("Weather?")
    record = record_of(run, session_id="s", command="run", task="Weather?", model="m", profile="p", exit_code=6)
    shown = _show(record).splitlines()
    assert shown[3].startswith("ended: stuck (exit 6); 0 call(s)")
    assert shown[4].startswith(f"stuck: same_rejection in turns 1, 2, 3: {bad} (refused: get_weather:")
    assert len(shown) == 5
