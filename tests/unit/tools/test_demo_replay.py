"""The demo tools' replays agree with the world: assign, unassign, assign again leaves the order assigned."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tooldispatch.agent.feedback import tool_answer
from tooldispatch.dispatch import Dispatcher, DispatchResult, ManualClock
from tooldispatch.tools.demo import DemoWorld, build_registry

PAIR = {"driver_id": "d-north-1", "order_id": "o-101"}


@pytest.fixture
def world() -> DemoWorld:
    return DemoWorld.seed()


@pytest.fixture
def d(world: DemoWorld) -> Dispatcher:
    return Dispatcher(build_registry(world), store=":memory:", clock=ManualClock(1_700_000_000.0))


def _run(d: Dispatcher, name: str, args: dict[str, Any], session: str = "s") -> DispatchResult:
    return d.dispatch(name, args, session_id=session)


def _told(result: DispatchResult) -> Any:
    """What the model reads in the tool message for this call."""
    return json.loads(tool_answer(result))


def test_the_replay_sequence_ends_assigned_and_the_model_is_told_so(d: Dispatcher, world: DemoWorld) -> None:
    """refresh, assign, unassign, refresh, assign: every answer is a fresh run that matches the order's state."""
    steps = [
        ("refresh_drivers", {"zone": "north"}, None),
        ("assign_driver", PAIR, "assigned"),
        ("unassign_driver", PAIR, "pending"),
        ("refresh_drivers", {"zone": "north"}, None),
        ("assign_driver", PAIR, "assigned"),
    ]
    for name, args, status in steps:
        result = _run(d, name, args)
        assert (result.status, result.reason) == ("ok", None), (name, result.content)
        if status is not None:
            assert _told(result) == {"order_id": "o-101", "driver_id": "d-north-1", "status": status}
            assert world.order("o-101")["status"] == status
    order = _run(d, "get_order", {"order_id": "o-101"})
    assert _told(order) == {
        "id": "o-101",
        "zone": "north",
        "customer": "c-101",
        "status": "assigned",
        "driver_id": "d-north-1",
    }
    assert world.count_effects("assign_driver") == 2


def test_rollback_after_the_sequence_succeeds(d: Dispatcher, world: DemoWorld) -> None:
    """The rollback undoes the assignment that stands, once, and leaves the order pending."""
    for name, args in (
        ("refresh_drivers", {"zone": "north"}),
        ("assign_driver", PAIR),
        ("unassign_driver", PAIR),
        ("refresh_drivers", {"zone": "north"}),
        ("assign_driver", PAIR),
    ):
        _run(d, name, args)
    results = d.rollback("s")
    assert [(r.trace.tool, r.status, r.reason) for r in results] == [("unassign_driver", "ok", None)]
    assert (world.order("o-101")["status"], world.order("o-101")["driver_id"]) == ("pending", None)
    assert [e.state for e in d.saga("s")] == ["compensated", "compensated"]
    assert world.count_effects("unassign_driver") == 2


def test_saga_compensation_then_the_same_assignment_runs(d: Dispatcher, world: DemoWorld) -> None:
    """assign, rollback, assign: the saga's undo ends the record; the assignment runs and the order is assigned;
    an unassign after it runs too, rather than replaying an older answer."""
    _run(d, "refresh_drivers", {"zone": "north"})
    _run(d, "assign_driver", PAIR)
    assert [r.status for r in d.rollback("s")] == ["ok"]
    again = _run(d, "assign_driver", PAIR)
    assert (again.status, again.reason, world.order("o-101")["status"]) == ("ok", None, "assigned")
    undo = _run(d, "unassign_driver", PAIR)
    assert (undo.status, undo.reason, world.order("o-101")["status"]) == ("ok", None, "pending")
    assert d.rollback("s") == []


def test_cancel_in_between_is_told_by_the_world(d: Dispatcher, world: DemoWorld) -> None:
    """assign, cancel (approved), assign: cancel_order acts on the order too, so the second assign runs and the
    model reads the world's refusal, not a stored "assigned"; the rollback skips the replaced assignment."""
    _run(d, "refresh_drivers", {"zone": "north"})
    _run(d, "assign_driver", PAIR)
    waiting = _run(d, "cancel_order", {"order_id": "o-101", "reason": "customer request"})
    assert waiting.approval_id is not None
    cancelled = d.approve(waiting.approval_id)
    assert cancelled.ok
    again = _run(d, "assign_driver", PAIR)
    assert (again.status, again.reason) == ("error", "tool_error")
    assert "order o-101 is cancelled, not pending" in _told(again)["message"]
    assert d.rollback("s") == []
    assert [(e.state, e.compensation_trace_id) for e in d.saga("s")] == [("superseded", cancelled.trace.id)]
    assert world.order("o-101")["status"] == "cancelled"


def test_another_driver_in_between_is_told_by_the_world(d: Dispatcher, world: DemoWorld) -> None:
    """assign d1, unassign d1, assign d2, assign d1: the last runs and is refused (o-101 is d2's), and the
    rollback undoes d2's assignment alone."""
    other = {"driver_id": "d-north-2", "order_id": "o-101"}
    _run(d, "refresh_drivers", {"zone": "north"})
    _run(d, "assign_driver", PAIR)
    _run(d, "unassign_driver", PAIR)
    assert _run(d, "assign_driver", other).ok
    last = _run(d, "assign_driver", PAIR)
    assert (last.status, last.reason) == ("error", "tool_error")
    assert "o-101 is assigned to d-north-2" in _told(last)["message"]
    results = d.rollback("s")
    assert [(r.trace.tool, dict(r.trace.params), r.status) for r in results] == [("unassign_driver", other, "ok")]
    assert world.order("o-101")["status"] == "pending"


def test_plain_repeat_is_still_a_replay_and_says_so(d: Dispatcher, world: DemoWorld) -> None:
    """With nothing in between, the repeat is answered from the store, once run, and the model reads already_done."""
    _run(d, "refresh_drivers", {"zone": "north"})
    _run(d, "assign_driver", PAIR)
    repeat = _run(d, "assign_driver", PAIR)
    assert (repeat.status, repeat.reason) == ("ok", "idempotent_replay")
    assert _told(repeat)["already_done"] is True
    assert (world.count_effects("assign_driver"), world.order("o-101")["status"]) == (1, "assigned")
