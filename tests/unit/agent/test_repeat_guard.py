"""The repeat guard: a turn that only repeats answered calls is not dispatched; the answer comes without tools."""

from __future__ import annotations

import json
from typing import Any

from tooldispatch.agent import Agent, Budget, Held, Stuck
from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.dispatch import Dispatcher, Registry
from tooldispatch.runlog import record_of
from tooldispatch.tools.demo import DemoWorld, build_registry
from tooldispatch.types import ToolCall

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}


def _call(name: str, **args: Any) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def _registry(log: list[str]) -> Registry:
    reg = Registry()

    def get_weather(city: str) -> dict[str, Any]:
        log.append(f"get_weather {city}")
        return {"city": city, "sky": "sunny", "celsius": 22}

    def set_alarm(city: str) -> dict[str, Any]:
        log.append(f"set_alarm {city}")
        return {"alarm": city}

    def job_status(city: str) -> dict[str, Any]:
        log.append(f"job_status {city}")
        return {"state": "running"}

    reg.register("get_weather", get_weather, schema=WEATHER, read_only=True, concurrency_safe=True)
    reg.register("set_alarm", set_alarm, schema=WEATHER, read_only=False)
    reg.register("job_status", job_status, schema=WEATHER, read_only=True, concurrency_safe=True)
    return reg


def _script(*turns: str) -> ScriptedBackend:
    return ScriptedBackend([ScriptedTurn(content=t) for t in turns])


PARIS = _call("get_weather", city="Paris")


def test_a_repeated_read_only_call_is_held_and_the_answer_comes_with_calls_disabled() -> None:
    """The repeat runs nowhere (not even early); the turn is generated once more with tool_choice none, and that
    text is the final answer, marked as the repeat guard's, with the held call and the tools-disabled turn kept."""
    log: list[str] = []
    backend = _script(PARIS, PARIS, "It is sunny in Paris, 22 C.")
    run = Agent(backend=backend, dispatcher=Dispatcher(_registry(log))).run("Weather in Paris?")
    assert log == ["get_weather Paris"]
    assert [r.tool_choice for r in backend.requests] == ["auto", "auto", "none"]
    assert backend.requests[2].messages == backend.requests[1].messages
    assert (run.end, run.answered_by, run.final_answer) == (
        "final_answer",
        "repeat_guard",
        "It is sunny in Paris, 22 C.",
    )
    assert [(t.index, len(t.tool_runs), t.tools_disabled) for t in run.turns] == [
        (0, 1, False),
        (1, 0, False),
        (2, 0, True),
    ]
    (held,) = run.turns[1].held
    assert (held.call.name, held.call.arguments, held.answered_in) == ("get_weather", {"city": "Paris"}, 0)
    assert run.turns[1].notes == (
        "repeat_guard: this turn only repeats calls whose results are already in the conversation (get_weather "
        "(answered in turn 1)); not dispatched, the turn is generated once more with calls disabled and its text is "
        "the answer",
    )
    assert [m["role"] for m in run.messages] == ["user", "assistant", "tool"]
    record = record_of(run, session_id="s", command="run", task="t", model="m", profile="p", exit_code=0)
    assert [m["role"] for m in record.conversation()] == ["user", "assistant", "tool", "assistant"]
    assert record.conversation()[-1] == {"role": "assistant", "content": "It is sunny in Paris, 22 C."}
    assert run.summary()["repeat_guard"] == 1
    data = run.to_dict()
    assert (data["answered_by"], data["turns"][2]["tools_disabled"]) == ("repeat_guard", True)
    assert data["turns"][1]["held"] == [
        {"call": held.call.to_dict(), "answered_in": 0},
    ]


def test_a_repeated_side_effecting_call_is_never_run_again() -> None:
    """A repeated send_message is held: the world keeps its one message and the run answers without tools."""
    world = DemoWorld.seed()
    send = _call("send_message", to="c-101", subject="S", body="B")
    backend = _script(send, send, "Sent.")
    run = Agent(backend=backend, dispatcher=Dispatcher(build_registry(world)), budget=Budget(max_turns=4)).run("go")
    assert world.count_effects() == 1
    assert [r.call.name for r in run.tool_runs] == ["send_message"]
    assert (run.answered_by, run.final_answer) == ("repeat_guard", "Sent.")


def test_a_read_only_answer_goes_stale_after_a_side_effect() -> None:
    """After a successful side-effecting call, the same read-only call runs again: the world may have changed."""
    log: list[str] = []
    backend = _script(PARIS, _call("set_alarm", city="Paris"), PARIS, "Done.")
    run = Agent(backend=backend, dispatcher=Dispatcher(_registry(log))).run("go")
    assert log == ["get_weather Paris", "set_alarm Paris", "get_weather Paris"]
    assert (run.answered_by, run.final_answer) == ("model", "Done.")
    assert all(t.held == () for t in run.turns)


def test_a_side_effect_undone_by_its_compensation_is_not_held() -> None:
    """assign_driver after unassign_driver (its declared compensation) succeeded reaches the dispatcher again."""
    world = DemoWorld.seed()
    refresh = _call("refresh_drivers", zone="north")
    assign = _call("assign_driver", driver_id="d-north-1", order_id="o-101")
    unassign = _call("unassign_driver", driver_id="d-north-1", order_id="o-101")
    backend = _script(refresh, assign, unassign, assign, "Done.")
    run = Agent(backend=backend, dispatcher=Dispatcher(build_registry(world)), budget=Budget(max_turns=6)).run("go")
    assert [r.call.name for r in run.tool_runs] == [
        "refresh_drivers",
        "assign_driver",
        "unassign_driver",
        "assign_driver",
    ]
    assert all(t.held == () for t in run.turns)
    assert run.answered_by == "model"


def test_a_turn_with_a_new_call_beside_the_repeat_runs_both() -> None:
    """The guard holds a turn only when every call repeats: one new call and the whole turn is dispatched (the new
    call starts early, the repeat waits for the end of the turn)."""
    log: list[str] = []
    backend = _script(PARIS, PARIS + "\n" + _call("get_weather", city="Rome"), "Both sunny.")
    run = Agent(backend=backend, dispatcher=Dispatcher(_registry(log))).run("go")
    assert log == ["get_weather Paris", "get_weather Rome", "get_weather Paris"]
    assert (run.answered_by, run.summary()["repeat_guard"]) == ("model", 0)


def test_a_declared_polling_tool_is_never_held() -> None:
    """job_status, declared in polling_tools, runs every time it is called."""
    log: list[str] = []
    poll = _call("job_status", city="Paris")
    backend = _script(poll, poll, "Still running.")
    run = Agent(backend=backend, dispatcher=Dispatcher(_registry(log)), polling_tools=["job_status"]).run("go")
    assert log == ["job_status Paris", "job_status Paris"]
    assert run.answered_by == "model"


def test_switched_off_the_repeat_runs() -> None:
    """With repeat_guard=False the repeated read-only call is dispatched again, as before the guard."""
    log: list[str] = []
    run = Agent(backend=_script(PARIS, PARIS, "Sunny."), dispatcher=Dispatcher(_registry(log)), repeat_guard=False)
    assert run.run("go").answered_by == "model"
    assert log == ["get_weather Paris", "get_weather Paris"]


def test_an_answer_without_tools_that_is_again_a_call_ends_the_run_as_stuck() -> None:
    """When the tools-disabled turn is a call again, nothing runs and the run ends stuck, the text kept."""
    log: list[str] = []
    broken = '<tool_call>{"name": "get_weather", "arguments": {"city" "Paris"}}</tool_call>'
    run = Agent(backend=_script(PARIS, PARIS, broken), dispatcher=Dispatcher(_registry(log))).run("go")
    assert log == ["get_weather Paris"]
    assert (run.end, run.final_answer, run.answered_by) == ("stuck", None, None)
    assert run.stuck == Stuck("no_answer_without_tools", (1, 2), broken)
    assert run.turns[2].completion.content == broken
    assert run.turns[2].outcome.rejected[0].bucket == "InvalidJson"


def test_an_answer_without_tools_that_is_a_readable_call_ends_the_run_as_stuck_too() -> None:
    """A readable call in the tools-disabled turn (here in doubled braces) is not run either: the run ends stuck."""
    log: list[str] = []
    doubled = '{{"name": "get_weather", "arguments": {"city": "Paris"}}}'
    run = Agent(backend=_script(PARIS, PARIS, doubled), dispatcher=Dispatcher(_registry(log))).run("go")
    assert log == ["get_weather Paris"]
    assert (run.end, run.final_answer, run.answered_by) == ("stuck", None, None)
    assert run.stuck == Stuck("no_answer_without_tools", (1, 2), doubled)


def test_the_guard_ignores_earlier_conversations() -> None:
    """Results from before the user's message do not count: a call answered in the history runs again."""
    log: list[str] = []
    history = [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "name": "get_weather", "content": '{"sky": "rain"}'},
        {"role": "assistant", "content": "Rain."},
    ]
    run = Agent(backend=_script(PARIS, "Sunny now."), dispatcher=Dispatcher(_registry(log))).run(
        "And now?", history=history
    )
    assert log == ["get_weather Paris"]
    assert run.final_answer == "Sunny now."


def test_held_records_the_call_and_its_turn() -> None:
    """Held.to_dict names the call and the 0-based turn whose result the conversation holds."""
    held = Held(ToolCall("get_weather", {"city": "Paris"}), 2)
    assert held.to_dict() == {"call": ToolCall("get_weather", {"city": "Paris"}).to_dict(), "answered_in": 2}


def test_logs_show_the_held_call_and_who_answered() -> None:
    """`tooldispatch logs RUN` names the repeat guard as the answer's source and the held call with its turn."""
    from tooldispatch.cli.home import _show

    run = Agent(backend=_script(PARIS, PARIS, "Sunny."), dispatcher=Dispatcher(_registry([]))).run("Weather?")
    record = record_of(run, session_id="s", command="run", task="Weather?", model="m", profile="p", exit_code=0)
    shown = _show(record).splitlines()
    assert shown[4:] == [
        "answered by the repeat guard: generated with calls disabled, not the model's first choice",
        '  call get_weather {"city": "Paris"} → ok',
        "  turn 2: repeat_guard: this turn only repeats calls whose results are already in the conversation "
        "(get_weather (answered in turn 1)); not dispatched, the turn is generated once more with calls disabled and "
        "its text is the answer",
        '  held get_weather {"city": "Paris"} (answered in turn 1): not dispatched',
        "answer: Sunny.",
    ]


def test_the_answer_without_tools_is_never_grammar_constrained() -> None:
    """A constrained agent's guard turn asks for tool_choice none and no grammar (a call grammar would force a call)."""
    backend = _script(PARIS, PARIS, "Sunny.")
    Agent(backend=backend, dispatcher=Dispatcher(_registry([])), constrained=True).run("go")
    assert [(r.tool_choice, r.constrained) for r in backend.requests] == [
        ("auto", True),
        ("auto", True),
        ("none", False),
    ]


def test_the_guard_leaves_required_calls_alone() -> None:
    """With tool_choice required every turn must be a call: the repeat is dispatched, no tools-disabled turn."""
    log: list[str] = []
    backend = _script(PARIS, PARIS)
    run = Agent(
        backend=backend, dispatcher=Dispatcher(_registry(log)), tool_choice="required", budget=Budget(max_turns=2)
    ).run("go")
    assert log == ["get_weather Paris", "get_weather Paris"]
    assert [r.tool_choice for r in backend.requests] == ["required", "required"]
    assert (run.end, run.answered_by) == ("max_turns", None)


def test_a_done_call_written_again_with_a_made_up_result_is_held() -> None:
    """The demo's loop: assign_driver again with an invented result after it, rejected as running text, is a
    repeat of the answered call; the turn is answered without tools instead of being sent back as feedback."""
    world = DemoWorld.seed()
    refresh = _call("refresh_drivers", zone="north")
    assign = '{"name": "assign_driver", "arguments": {"driver_id": "d-north-1", "order_id": "o-101"}}'
    again = assign + '\n{"order_id": "o-101", "status": "assigned"}'
    backend = _script(refresh, assign, again, "Driver d-north-1 is assigned to o-101.")
    run = Agent(backend=backend, dispatcher=Dispatcher(build_registry(world)), budget=Budget(max_turns=6)).run("go")
    assert [r.call.name for r in run.tool_runs] == ["refresh_drivers", "assign_driver"]
    assert run.turns[2].outcome.rejected[0].bucket == "Ambiguous"
    (held,) = run.turns[2].held
    assert (held.call.name, held.answered_in) == ("assign_driver", 1)
    assert (run.end, run.answered_by, run.final_answer) == (
        "final_answer",
        "repeat_guard",
        "Driver d-north-1 is assigned to o-101.",
    )
    assert world.order("o-101")["status"] == "assigned"


def test_an_answer_without_tools_that_repeats_the_call_as_text_is_no_answer() -> None:
    """The guard's turn writing the done call again with made-up results (rejected, never run) is not taken as the
    answer: the run ends stuck with that text as the evidence."""
    world = DemoWorld.seed()
    assign = '{"name": "assign_driver", "arguments": {"driver_id": "d-north-1", "order_id": "o-101"}}'
    made_up = assign + '\n{"message_id": 1, "to": "c-101"}'
    backend = _script(_call("refresh_drivers", zone="north"), assign, assign, made_up)
    run = Agent(backend=backend, dispatcher=Dispatcher(build_registry(world)), budget=Budget(max_turns=6)).run("go")
    assert run.turns[3].tools_disabled
    assert [c.bucket for c in run.turns[3].outcome.rejected] == ["Ambiguous"]
    assert (run.end, run.final_answer, run.answered_by) == ("stuck", None, None)
    assert run.stuck == Stuck("no_answer_without_tools", (2, 3), " ".join(made_up.split()))
