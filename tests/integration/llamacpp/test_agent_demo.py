"""A full agent run against the demo logistics world with SmolLM2 in process."""

from __future__ import annotations

import json

import pytest

from tooldispatch.agent import Agent, AgentRun, Budget
from tooldispatch.backends.llamacpp import LlamaCppBackend
from tooldispatch.dispatch import Dispatcher
from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.tools.demo import DemoWorld, build_registry, demo_tasks

pytestmark = pytest.mark.integration

TASK = next(t for t in demo_tasks() if t.id == "assign-north")


def _run(backend: LlamaCppBackend, *, constrained: bool) -> tuple[AgentRun, DemoWorld, Dispatcher]:
    world = DemoWorld.seed()
    dispatcher = Dispatcher(build_registry(world))
    agent = Agent(
        backend=backend,
        dispatcher=dispatcher,
        budget=Budget(max_turns=2),
        max_tokens=96,
        constrained=constrained,
        tool_choice="required" if constrained else "auto",
    )
    return agent.run(TASK.prompt), world, dispatcher


def _side_effects_match_dispatch(run: AgentRun, world: DemoWorld, dispatcher: Dispatcher) -> None:
    side_effecting = {t.name for t in dispatcher.registry if t.side_effecting}
    ran_ok = [
        r
        for r in run.tool_runs
        if r.result.status == "ok" and r.result.reason != "idempotent_replay" and r.call.name in side_effecting
    ]  # a replay answers from the idempotency store: nothing ran again
    assert world.count_effects() == len(ran_ok)
    assert len(dispatcher.traces()) >= len(run.tool_runs)


def test_prompt_mode_run_is_consistent(smollm2_backend: LlamaCppBackend) -> None:
    """Prompt mode: each turn's outcome is the parser's reading of the model's text, and side effects match."""
    run, world, dispatcher = _run(smollm2_backend, constrained=False)
    assert 1 <= len(run.turns) <= 2
    for turn in run.turns:
        again = parse_tool_calls(
            turn.completion.content,
            dispatcher.registry.specs(),
            finish_reason=turn.completion.finish_reason,
            repair={t.name: t.repair for t in dispatcher.registry},
        )
        assert [c.to_dict() for c in turn.outcome.calls] == [c.to_dict() for c in again.calls]
    _side_effects_match_dispatch(run, world, dispatcher)
    json.dumps(run.to_dict(), default=str)


def test_constrained_mode_always_names_a_declared_tool(smollm2_backend: LlamaCppBackend) -> None:
    """Constrained, required: every turn holds a call candidate naming a declared tool; side effects match dispatch."""
    run, world, dispatcher = _run(smollm2_backend, constrained=True)
    names = set(dispatcher.registry.names)
    for turn in run.turns:
        assert turn.outcome.candidates, turn.completion.content
        assert all(c.name in names for c in turn.outcome.candidates)
    _side_effects_match_dispatch(run, world, dispatcher)
