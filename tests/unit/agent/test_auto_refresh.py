"""``Agent(auto_refresh=True)``: a write refused for stale state is retried after its read-only refresher."""

from __future__ import annotations

import json

from tooldispatch.agent import Agent, Budget
from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.dispatch import Dispatcher, Registry
from tooldispatch.dispatch.refresh import refresher_call
from tooldispatch.tools.demo import DemoWorld, build_registry

ASSIGN = (
    '<tool_call>{"name": "assign_driver", "arguments": {"driver_id": "d-north-1", "order_id": "o-101"}}</tool_call>'
)


def _run(auto_refresh: bool) -> tuple[DemoWorld, list[tuple[str, str, str | None]], list[str]]:
    world = DemoWorld.seed()
    backend = ScriptedBackend([ScriptedTurn(content=ASSIGN), ScriptedTurn(content="Done.")])
    agent = Agent(
        backend=backend,
        dispatcher=Dispatcher(build_registry(world)),
        budget=Budget(max_turns=3),
        auto_refresh=auto_refresh,
    )
    run = agent.run("assign")
    runs: list[tuple[str, str, str | None]] = [
        (r.call.name, r.result.status, r.result.reason) for r in run.turns[0].tool_runs
    ]
    tool_messages = [m["name"] for m in run.messages if m["role"] == "tool"]
    return world, runs, tool_messages


def test_refused_write_is_refreshed_and_retried() -> None:
    """The stale assign_driver runs refresh_drivers (all zones) itself, then assigns; the model sees its own call."""
    world, runs, tool_messages = _run(auto_refresh=True)
    assert runs == [("refresh_drivers", "ok", None), ("assign_driver", "ok", None)]
    assert world.order("o-101")["status"] == "assigned"
    assert tool_messages == ["assign_driver"]


def test_without_the_switch_the_refusal_stands() -> None:
    """By default nothing runs on the model's behalf: the refusal goes back to the model."""
    world, runs, _ = _run(auto_refresh=False)
    assert runs == [("assign_driver", "rejected", "stale_state_must_refresh")]
    assert world.order("o-101")["status"] == "pending"


def test_refresher_must_be_declared_read_only_and_callable() -> None:
    """No plan when the refresher is not declared read-only, or needs an argument the call lacks."""
    reg = Registry()
    reg.register(
        "write",
        lambda x: {"x": x},
        schema=_obj({"x": {}}, ["x"]),
        read_only=False,
        requires_fresh_state={"resource": "r", "max_age_s": 5},
    )
    reg.register("refresh", lambda zone: {}, schema=_obj({"zone": {}}, ["zone"]), refreshes="r")
    assert refresher_call(reg, "write", {"x": 1}) is None  # read_only undeclared: the conservative path
    reg2 = Registry()
    reg2.register(
        "write",
        lambda x: {"x": x},
        schema=_obj({"x": {}}, ["x"]),
        read_only=False,
        requires_fresh_state={"resource": "r", "max_age_s": 5},
    )
    reg2.register("refresh", lambda zone: {}, schema=_obj({"zone": {}}, ["zone"]), read_only=True, refreshes="r")
    assert refresher_call(reg2, "write", {"x": 1}) is None
    assert refresher_call(reg2, "write", {"x": 1, "zone": "n"}) == ("refresh", {"zone": "n"})
    assert json.dumps(refresher_call(build_registry(DemoWorld.seed()), "assign_driver", {"driver_id": "d"})) == (
        '["refresh_drivers", {}]'
    )


def _obj(properties: dict[str, object], required: list[str]) -> dict[str, object]:
    return {"type": "object", "properties": properties, "required": required}


def test_a_call_identical_to_the_one_just_refused_is_pointed_out() -> None:
    """The second identical unusable call gets feedback saying it repeats the last turn's refused call."""
    bad = '<tool_call>{"name": "assign_driver", "arguments": {"driver_id": "d-north-1", "order_id": "o-101", "x": 1}}'
    backend = ScriptedBackend([ScriptedTurn(content=bad + "</tool_call>")] * 2 + [ScriptedTurn(content="Done.")])
    run = Agent(
        backend=backend, dispatcher=Dispatcher(build_registry(DemoWorld.seed())), budget=Budget(max_turns=3)
    ).run("assign")
    first, second = run.turns[0].feedback, run.turns[1].feedback
    assert first is not None and "same call you sent last turn" not in first
    assert second is not None and "This is the same call you sent last turn, refused for the same reason" in second
