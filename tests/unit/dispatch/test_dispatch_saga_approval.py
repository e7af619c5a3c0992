"""Sagas (compensation in reverse order) and approvals (approve, edit, deny, resume after restart)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tooldispatch.dispatch import Dispatcher, ManualClock, Registry
from tooldispatch.errors import ConfigError

from .conftest import World, build_registry


def _assign(d: Dispatcher, driver: str, order: str, session: str = "s1") -> None:
    assert d.dispatch("assign_driver", {"driver_id": driver, "order_id": order}, session_id=session).ok


def test_rollback_compensates_in_reverse_order(dispatcher: Dispatcher, world: World) -> None:
    """Three assignments are undone newest first, with arguments taken from each call; each is traced."""
    dispatcher.dispatch("refresh_drivers", {}, session_id="s1")
    for driver, order in (("d1", "o1"), ("d2", "o2"), ("d1", "o3")):
        _assign(dispatcher, driver, order)
    results = dispatcher.rollback("s1")
    assert [r.status for r in results] == ["ok", "ok", "ok"]
    assert [entry for entry in world.log if entry[0] == "unassign_driver"] == [
        ("unassign_driver", {"driver_id": "d1", "order_id": "o3"}),
        ("unassign_driver", {"driver_id": "d2", "order_id": "o2"}),
        ("unassign_driver", {"driver_id": "d1", "order_id": "o1"}),
    ]
    assert [r.trace.trigger for r in results] == ["compensation"] * 3
    originals = [t.id for t in dispatcher.traces(session_id="s1", tool="assign_driver")]
    assert [r.trace.compensation_of for r in results] == originals[::-1]
    assert [e.state for e in dispatcher.saga("s1")] == ["compensated"] * 3


def test_rollback_runs_each_compensation_once(dispatcher: Dispatcher, world: World) -> None:
    """A second rollback finds nothing pending and runs nothing."""
    dispatcher.dispatch("refresh_drivers", {}, session_id="s1")
    _assign(dispatcher, "d1", "o1")
    dispatcher.rollback("s1")
    assert dispatcher.rollback("s1") == []
    assert world.calls["unassign_driver"] == 1


def test_compensated_call_can_run_again(dispatcher: Dispatcher, world: World) -> None:
    """After its compensation, the same assignment is a new action, not an idempotent replay."""
    dispatcher.dispatch("refresh_drivers", {}, session_id="s1")
    _assign(dispatcher, "d1", "o1")
    dispatcher.rollback("s1")
    r = dispatcher.dispatch("assign_driver", {"driver_id": "d1", "order_id": "o1"}, session_id="s1")
    assert (r.status, r.reason, world.calls["assign_driver"]) == ("ok", None, 2)


def test_later_failure_compensates_the_saga(world: World, clock: ManualClock) -> None:
    """A side-effecting call failing mid-execution rolls back the session's earlier destructive calls."""
    reg = build_registry(world)

    def explode(order_id: str) -> dict[str, str]:
        raise RuntimeError("payment service crashed")

    reg.register("charge", explode, read_only=False)
    d = Dispatcher(reg, clock=clock)
    d.dispatch("refresh_drivers", {}, session_id="s1")
    _assign(d, "d1", "o1")
    _assign(d, "d2", "o2")
    failed = d.dispatch("charge", {"order_id": "o2"}, session_id="s1")
    assert failed.reason == "exception"
    assert [e[1]["driver_id"] for e in world.log if e[0] == "unassign_driver"] == ["d2", "d1"]
    assert json.loads(failed.content)["message"] == (
        "charge raised an unexpected error: RuntimeError: payment service crashed; the session's earlier actions "
        'were compensated, newest first: unassign_driver {"driver_id": "d2", "order_id": "o2"}: ok, '
        'unassign_driver {"driver_id": "d1", "order_id": "o1"}: ok'
    )
    compensations = [t for t in d.traces(session_id="s1") if t.trigger == "compensation"]
    assert failed.trace.extra == {"compensations": [t.id for t in compensations]}


def test_rejections_do_not_abort_the_saga(dispatcher: Dispatcher, world: World) -> None:
    """A validation error is the model's to fix; it does not roll anything back."""
    dispatcher.dispatch("refresh_drivers", {}, session_id="s1")
    _assign(dispatcher, "d1", "o1")
    assert dispatcher.dispatch("send_message", {"to": 1}, session_id="s1").reason == "validation"
    assert world.calls["unassign_driver"] == 0


def test_inverse_arguments_fall_back_to_the_result() -> None:
    """An inverse parameter missing from the call's arguments is taken from its result."""
    undone: list[str] = []
    reg = Registry()
    reg.register(
        "release",
        lambda booking_id: undone.append(booking_id) or {},
        schema={"type": "object", "properties": {"booking_id": {"type": "string"}}},
        read_only=False,
    )
    reg.register(
        "book",
        lambda room: {"booking_id": f"b-{room}"},
        schema={"type": "object", "properties": {"room": {"type": "string"}}},
        read_only=False,
        destructive=True,
        compensate="release",
    )
    d = Dispatcher(reg)
    assert d.dispatch("book", {"room": "r1"}).ok
    d.rollback("default")
    assert undone == ["b-r1"]


def test_approve_runs_the_call(dispatcher: Dispatcher, world: World) -> None:
    """Approving a suspended call runs it once, traced with trigger 'approval' and its approval id."""
    pending = dispatcher.dispatch("cancel_order", {"order_id": "o1"}, session_id="s1")
    assert pending.approval_id is not None
    r = dispatcher.approve(pending.approval_id)
    assert (r.status, r.content, r.trace.trigger, r.trace.approval_id) == (
        "ok",
        '{"cancelled": "o1"}',
        "approval",
        pending.approval_id,
    )
    assert world.log == [("cancel_order", {"order_id": "o1"})]
    assert dispatcher.approvals() == []
    assert [a.state for a in dispatcher.approvals(None)] == ["approved"]


def test_approve_with_edited_arguments(dispatcher: Dispatcher, world: World) -> None:
    """A person may edit the arguments; the edited call is validated and runs, and the edit is traced."""
    pending = dispatcher.dispatch("cancel_order", {"order_id": "o1"}, session_id="s1")
    assert pending.approval_id is not None
    r = dispatcher.approve(pending.approval_id, args={"order_id": "o2"})
    assert r.ok
    assert world.log == [("cancel_order", {"order_id": "o2"})]
    assert r.trace.repairs[-1] == {
        "kind": "approval_edit",
        "path": "",
        "before": {"order_id": "o1"},
        "after": {"order_id": "o2"},
    }


def test_edited_arguments_are_validated(dispatcher: Dispatcher, world: World) -> None:
    """Edited arguments that break the schema are rejected like any call."""
    pending = dispatcher.dispatch("cancel_order", {"order_id": "o1"}, session_id="s1")
    assert pending.approval_id is not None
    assert dispatcher.approve(pending.approval_id, args={"order_id": 5}).reason == "validation"
    assert world.calls["cancel_order"] == 0


def test_deny_never_runs_and_tells_the_model(dispatcher: Dispatcher, world: World) -> None:
    """A denied call does not run; the model gets approval_denied with the person's reason."""
    pending = dispatcher.dispatch("cancel_order", {"order_id": "o1"}, session_id="s1")
    assert pending.approval_id is not None
    r = dispatcher.deny(pending.approval_id, "customer already paid")
    assert (r.status, r.reason) == ("rejected", "approval_denied")
    assert json.loads(r.content)["message"] == "a person denied this cancel_order call: customer already paid"
    assert world.calls["cancel_order"] == 0


def test_each_approval_is_decided_once(dispatcher: Dispatcher) -> None:
    """Approving twice, or approving a denied call, raises ConfigError saying it was already decided."""
    pending = dispatcher.dispatch("cancel_order", {"order_id": "o1"}, session_id="s1")
    assert pending.approval_id is not None
    dispatcher.deny(pending.approval_id, "no")
    with pytest.raises(ConfigError, match="was already denied"):
        dispatcher.approve(pending.approval_id)
    with pytest.raises(ConfigError, match="no approval 'apr_missing'"):
        dispatcher.deny("apr_missing", "no")


def test_approval_resumes_in_a_new_dispatcher(tmp_path: Path, world: World) -> None:
    """A call suspended by one Dispatcher is approved and run by a new one on the same file."""
    db = tmp_path / "state.db"
    first = Dispatcher(build_registry(world), store=db)
    pending = first.dispatch("cancel_order", {"order_id": "o7"}, session_id="s9")
    first.close()
    second = Dispatcher(build_registry(world), store=db)
    [record] = second.approvals()
    assert (record.id, record.session_id, record.args) == (pending.approval_id, "s9", {"order_id": "o7"})
    r = second.approve(record.id)
    assert (r.status, r.trace.session_id) == ("ok", "s9")
    assert world.log == [("cancel_order", {"order_id": "o7"})]
    second.close()


def test_repeated_suspended_call_reuses_its_approval(dispatcher: Dispatcher) -> None:
    """The model repeating a call that waits for approval gets the same approval id, not a second request."""
    first = dispatcher.dispatch("cancel_order", {"order_id": "o1"}, session_id="s1")
    again = dispatcher.dispatch("cancel_order", {"order_id": "o1"}, session_id="s1")
    other = dispatcher.dispatch("cancel_order", {"order_id": "o2"}, session_id="s1")
    assert first.approval_id == again.approval_id != other.approval_id
    assert len(dispatcher.approvals()) == 2
