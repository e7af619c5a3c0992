"""What goes back to the model after its turn: history without duplicated calls, and refusals it can act on."""

from __future__ import annotations

import json

from tooldispatch.agent import Agent, Budget
from tooldispatch.agent.feedback import corrected_arguments, rejection_payload, undeclared_keys
from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.dispatch import Dispatcher
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
    assert second[-2]["tool_calls"][0]["id"] == "refused_0"
    answer = json.loads(second[-1]["content"])
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == "refused_0"
    assert answer["corrected_call"] == {
        "name": "assign_driver",
        "arguments": {"driver_id": "d-north-1", "order_id": "o-101"},
    }
    assert world.count_effects() == 0
    assert [r.call.name for r in run.tool_runs] == ["list_drivers"]
