"""``run_demo_task``: one demo run in a fresh world, scored by the world, with the dispatcher's own calls counted."""

from __future__ import annotations

import json

from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.tools.demo import demo_tasks, run_demo_task

TASK = next(t for t in demo_tasks() if t.id == "assign-north")


def _call(name: str, **args: str) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def _script() -> ScriptedBackend:
    return ScriptedBackend(
        [
            ScriptedTurn(content=_call("assign_driver", driver_id="d-north-1", order_id="o-101")),
            ScriptedTurn(content=_call("send_message", to="c-101", subject="Order o-101", body="On the way")),
            ScriptedTurn(content="Done."),
        ]
    )


def test_done_with_auto_refresh_counts_the_refresh_apart_from_model_calls() -> None:
    """With auto_refresh the task is done; the refresh is counted as the dispatcher's, not the model's."""
    out = run_demo_task(
        _script(), TASK, constrained=False, seed=3, temperature=0.0, max_turns=4, max_tokens=64, auto_refresh=True
    )
    assert (out.seed, out.mode, out.done, out.end) == (3, "prompt", True, "final_answer")
    assert (out.model_calls, out.auto_refreshes, out.side_effects) == (2, 1, 2)
    assert out.line() == (
        "seed 3 prompt      task done (ended: final_answer; 3 turns, 2 model calls, 1 auto refreshes, 0 with extra "
        "arguments dropped, 2 side effects)"
    )
    assert out.to_dict()["transcript"]["end"] == "final_answer"


def test_without_auto_refresh_the_same_calls_leave_the_order_pending() -> None:
    """Without the switch the stale assignment is refused and the task is not done."""
    out = run_demo_task(
        _script(), TASK, constrained=True, seed=0, temperature=0.0, max_turns=4, max_tokens=64, auto_refresh=False
    )
    assert (out.mode, out.done, out.model_calls, out.auto_refreshes, out.side_effects) == (
        "constrained",
        False,
        2,
        0,
        1,
    )
