"""What goes back to the model after its turn: history without duplicated calls, and refusals it can act on."""

from __future__ import annotations

import json
import re

import pytest

from tooldispatch.agent import Agent, AgentRun, Budget
from tooldispatch.agent.feedback import corrected_arguments, rejection_payload, undeclared_keys
from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.dispatch import Dispatcher
from tooldispatch.errors import ConfigError
from tooldispatch.tools.demo import DemoWorld, build_registry
from tooldispatch.toolspec import ToolSpec
from tooldispatch.types import Candidate

ASSIGN = ToolSpec(
    "assign_driver",
    parameters={
        "type": "object",
        "properties": {"driver_id": {"type": "string"}, "order_id": {"type": "string"}},
        "required": ["driver_id", "order_id"],
        "additionalProperties": False,
    },
    repair="lossless",
)


def _cand(arguments: dict[str, object], error: str = "invalid arguments") -> Candidate:
    return Candidate("raw", (0, 3), "hermes", "strict", "SchemaMismatch", "assign_driver", arguments, error=error)


def test_an_undeclared_key_is_named_with_the_declared_ones_and_the_corrected_call() -> None:
    """An undeclared key alone: the message names it and the tool's arguments; corrected_call leaves it out."""
    payload = rejection_payload(_cand({"driver_id": "d-1", "order_id": "o-1", "reason": "free"}), ASSIGN)
    assert payload == {
        "error": "invalid_arguments",
        "tool": "assign_driver",
        "message": '"reason" is not an argument of assign_driver: leave it out. assign_driver takes exactly these '
        "arguments: driver_id, order_id.",
        "recoverable": True,
        "attempts": 0,
        "retried": False,
        "suggestion": "send this call instead",
        "corrected_call": {"name": "assign_driver", "arguments": {"driver_id": "d-1", "order_id": "o-1"}},
    }


def test_no_corrected_call_when_dropping_keys_does_not_make_the_call_valid() -> None:
    """A missing required argument cannot be fixed by leaving keys out: no corrected_call, the error is kept."""
    payload = rejection_payload(
        _cand({"driver_id": "d-1", "note": "x"}, error='/: missing required argument "order_id"'), ASSIGN
    )
    assert "corrected_call" not in payload
    assert payload["message"] == (
        '"note" is not an argument of assign_driver: leave it out. '
        "assign_driver takes exactly these arguments: driver_id, order_id."
    )
    assert corrected_arguments({"driver_id": "d-1", "note": "x"}, ASSIGN) is None
    wrong_type = rejection_payload(
        _cand({"driver_id": 5, "order_id": "o-1"}, error="/driver_id: expected string"), ASSIGN
    )
    assert "corrected_call" not in wrong_type
    assert wrong_type["message"] == (
        "/driver_id: expected string. assign_driver takes exactly these arguments: driver_id, order_id."
    )


def test_open_schemas_have_no_undeclared_keys() -> None:
    """A schema that allows additional properties never calls a key undeclared."""
    open_tool = ToolSpec("t", parameters={"type": "object", "properties": {"a": {}}})
    assert undeclared_keys({"a": 1, "b": 2}, open_tool) == []
    assert undeclared_keys({"a": 1, "b": 2, "c": 3}, ASSIGN) == ["a", "b", "c"]


def test_history_holds_each_call_once_and_refusals_answer_their_call() -> None:
    """A fenced call goes back as a native call only (its text is dropped); a refused call gets a tool answer."""
    fenced = 'Listing first.\n```json\n{"name": "list_drivers", "arguments": {"zone": "north"}}\n```'
    bad = '<tool_call>{"name": "assign_driver", "arguments": {"driver_id": "d-north-1", "order_id": "o-101", '
    bad += '"reason": "free"}}</tool_call>'
    backend = ScriptedBackend([ScriptedTurn(content=fenced), ScriptedTurn(content=bad), ScriptedTurn(content="Ok.")])
    world = DemoWorld.seed()
    run = Agent(backend=backend, dispatcher=Dispatcher(build_registry(world)), budget=Budget(max_turns=3)).run("go")
    first, second = backend.requests[1].messages, backend.requests[2].messages
    assert first[-2]["content"] == "Listing first."
    assert [c["function"]["name"] for c in first[-2]["tool_calls"]] == ["list_drivers"]
    assert second[-2]["content"] is None
    refused_id = second[-2]["tool_calls"][0]["id"]
    assert re.fullmatch(r"call_[0-9a-f]{16}", refused_id)
    answer = json.loads(second[-1]["content"])
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == refused_id
    assert answer["corrected_call"] == {
        "name": "assign_driver",
        "arguments": {"driver_id": "d-north-1", "order_id": "o-101"},
    }
    assert world.count_effects() == 0
    assert [r.call.name for r in run.tool_runs] == ["list_drivers"]


BAD_ASSIGN = (
    '<tool_call>{"name": "assign_driver", "arguments": {"driver_id": "d-north-1", "order_id": "o-101", '
    '"reason": "free"}}</tool_call>'
)
BAD_CANCEL = (
    '<tool_call>{"name": "cancel_order", "arguments": {"order_id": "o-301", "reason": "asked", "note": "x"}}'
    "</tool_call>"
)


def _drop_run(content: str, *, drop: bool) -> tuple[DemoWorld, Agent, AgentRun]:
    world = DemoWorld.seed()
    backend = ScriptedBackend([ScriptedTurn(content=content), ScriptedTurn(content="Ok.")])
    agent = Agent(
        backend=backend,
        dispatcher=Dispatcher(build_registry(world)),
        budget=Budget(max_turns=2),
        auto_refresh=True,
        drop_extra_arguments=drop,
    )
    return world, agent, agent.run("go")


def test_switched_on_an_ignorable_extra_key_is_dropped_and_the_call_runs_traced() -> None:
    """drop_extra_arguments on, tool declared extra_arguments='ignore': the call runs without the key, flagged."""
    world, _, run = _drop_run(BAD_ASSIGN, drop=True)
    assert world.order("o-101")["status"] == "assigned"
    runs = run.turns[0].tool_runs
    assert [(r.call.name, r.result.status, sorted(r.call.flags)) for r in runs] == [
        ("refresh_drivers", "ok", ["auto_refresh"]),
        ("assign_driver", "ok", ["dropped_extra_arguments"]),
    ]
    assert runs[1].call.arguments == {"driver_id": "d-north-1", "order_id": "o-101"}
    assert [(p.kind, p.path, p.before, p.after) for p in runs[1].call.repairs] == [
        ("drop_key", "/reason", "free", None)
    ]
    assert run.summary()["by_dispatcher"] == {"auto_refresh": 1, "dropped_extra_arguments": 1}


def test_switched_off_the_same_call_is_refused_and_nothing_runs() -> None:
    """Without the switch the call is answered with the keys to leave out, and the world is unchanged."""
    world, _, run = _drop_run(BAD_ASSIGN, drop=False)
    assert world.count_effects() == 0
    assert run.tool_runs == ()
    assert run.summary()["by_dispatcher"] == {}


def test_a_tool_that_forbids_extra_keys_is_never_dropped() -> None:
    """cancel_order keeps extra_arguments='forbid': even switched on, its call is refused, not run or suspended."""
    world, _, run = _drop_run(BAD_CANCEL, drop=True)
    assert run.tool_runs == ()
    assert world.order("o-301")["status"] == "pending"
    answer = json.loads(run.turns[0].feedback or "{}")
    assert answer["message"].startswith('"note" is not an argument of cancel_order: leave it out.')


def test_a_cut_off_call_is_not_answered_as_a_call() -> None:
    """A call cut off by the token budget gets the user-turn feedback, not a tool answer."""
    cut = '<tool_call>{"name": "assign_driver", "arguments": {"driver_id": "d-north-1", "order'
    backend = ScriptedBackend([ScriptedTurn(content=cut, finish_reason="length"), ScriptedTurn(content="Ok.")])
    run = Agent(
        backend=backend, dispatcher=Dispatcher(build_registry(DemoWorld.seed())), budget=Budget(max_turns=2)
    ).run("go")
    assert run.turns[0].outcome.rejected[0].bucket == "Truncated"
    sent = backend.requests[1].messages
    assert sent[-1]["role"] == "user" and sent[-1]["content"].startswith("Your tool call could not be used:")


def test_a_replayed_side_effect_tells_the_model_it_already_ran() -> None:
    """With the repeat guard off, the second identical send_message is an idempotent replay: its answer says
    already_done, with the result."""
    send = '<tool_call>{"name": "send_message", "arguments": {"to": "c-101", "subject": "S", "body": "B"}}</tool_call>'
    world = DemoWorld.seed()
    backend = ScriptedBackend([ScriptedTurn(content=send), ScriptedTurn(content=send), ScriptedTurn(content="Ok.")])
    dispatcher = Dispatcher(build_registry(world))
    run = Agent(backend=backend, dispatcher=dispatcher, budget=Budget(max_turns=3), repeat_guard=False).run("go")
    first, second = (json.loads(m["content"]) for m in run.messages if m["role"] == "tool")
    assert first == {"message_id": 1, "to": "c-101", "subject": "S"}
    assert second == {
        "already_done": True,
        "note": "this exact call already ran earlier in this run; nothing was done again. Its result:",
        "result": first,
    }
    assert [r.result.reason for r in run.tool_runs] == [None, "idempotent_replay"]
    assert world.count_effects() == 1


def _bare_run(turns: list[str], **options: object) -> tuple[DemoWorld, ScriptedBackend, AgentRun]:
    world = DemoWorld.seed()
    backend = ScriptedBackend([*(ScriptedTurn(content=t) for t in turns), ScriptedTurn(content="Ok.")])
    agent = Agent(
        backend=backend,
        dispatcher=Dispatcher(build_registry(world)),
        budget=Budget(max_turns=len(turns) + 1),
        **{"feedback": "bare", **options},  # type: ignore[arg-type]
    )
    return world, backend, agent.run("go")


def test_bare_feedback_answers_a_refused_call_with_the_validators_error_alone() -> None:
    """feedback='bare': no signature, suggestion or corrected call; the validator's message as the parser wrote it."""
    _, backend, run = _bare_run([BAD_ASSIGN])
    [refused] = run.turns[0].outcome.rejected
    answer = json.loads(backend.requests[1].messages[-1]["content"])
    assert answer == {"error": "invalid_arguments", "tool": "assign_driver", "message": refused.error}
    assert "leave it out" not in (refused.error or "")


def test_bare_feedback_gives_a_replay_its_stored_result_without_the_note() -> None:
    send = '<tool_call>{"name": "send_message", "arguments": {"to": "c-101", "subject": "S", "body": "B"}}</tool_call>'
    world, _, run = _bare_run([send, send], repeat_guard=False)
    first, second = (json.loads(m["content"]) for m in run.messages if m["role"] == "tool")
    assert first == second == {"message_id": 1, "to": "c-101", "subject": "S"}
    assert [r.result.reason for r in run.tool_runs] == [None, "idempotent_replay"]
    assert world.count_effects() == 1


def test_bare_feedback_keeps_a_dispatcher_refusals_kind_tool_and_message_only() -> None:
    """An assignment refused as stale (no fresh driver list): the full answer's other keys are dropped."""
    assign = '<tool_call>{"name": "assign_driver", "arguments": {"driver_id": "d-north-1", "order_id": "o-101"}}'
    assign += "</tool_call>"
    _, _, full = _bare_run([assign], feedback="full")
    full_answer = json.loads(next(m["content"] for m in full.messages if m["role"] == "tool"))
    _, _, run = _bare_run([assign])
    [tool_run] = run.tool_runs
    answer = json.loads(next(m["content"] for m in run.messages if m["role"] == "tool"))
    assert tool_run.result.status != "ok"
    assert answer == {k: full_answer[k] for k in ("error", "tool", "message")}
    assert set(full_answer) - set(answer) >= {"suggestion", "recoverable"}


def test_bare_feedback_drops_the_repeat_note_and_the_closing_line_of_an_unusable_output() -> None:
    cut = '<tool_call>{"name": "assign_driver", "arguments": {"driver_id": "d-north-1", "order'
    world = DemoWorld.seed()
    backend = ScriptedBackend(
        [ScriptedTurn(content=cut, finish_reason="length"), ScriptedTurn(content=cut, finish_reason="length"),
         ScriptedTurn(content="Ok.")]
    )  # fmt: skip
    run = Agent(
        backend=backend, dispatcher=Dispatcher(build_registry(world)), budget=Budget(max_turns=3), feedback="bare"
    ).run("go")
    [cand] = run.turns[1].outcome.rejected
    expected = f"Your tool call could not be used:\n- call 'assign_driver' (Truncated): {cand.error}"
    assert run.turns[1].feedback == expected


def test_an_unknown_feedback_style_is_refused() -> None:
    with pytest.raises(ConfigError, match="feedback must be one of full, bare, not 'terse'"):
        Agent(backend=ScriptedBackend([]), dispatcher=Dispatcher(build_registry(DemoWorld.seed())), feedback="terse")


def test_strict_parsing_leaves_a_tolerated_call_as_the_answer_and_runs_nothing() -> None:
    """tolerant_parsing=False: Python-ish JSON in the tags is no call; the turn is a text answer."""
    text = "<tool_call>{'name': 'list_drivers', 'arguments': {'zone': 'north'}}</tool_call>"
    for tolerant in (True, False):
        backend = ScriptedBackend([ScriptedTurn(content=text), ScriptedTurn(content="Ok.")])
        run = Agent(
            backend=backend,
            dispatcher=Dispatcher(build_registry(DemoWorld.seed())),
            budget=Budget(max_turns=2),
            tolerant_parsing=tolerant,
        ).run("go")
        if tolerant:
            assert [r.call.name for r in run.tool_runs] == ["list_drivers"] and run.final_answer == "Ok."
        else:
            assert (run.tool_runs, run.final_answer, len(backend.requests)) == ((), text, 1)
