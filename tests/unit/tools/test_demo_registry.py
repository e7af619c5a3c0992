"""The demo tools' dispatch metadata, exercised through a Dispatcher with an in-memory store."""

from __future__ import annotations

import json

import pytest

from tooldispatch.dispatch import Dispatcher, ManualClock, Registry
from tooldispatch.tools.demo import SCHEMAS, DemoWorld, build_registry


@pytest.fixture
def world() -> DemoWorld:
    return DemoWorld.seed()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_700_000_000.0)


@pytest.fixture
def d(world: DemoWorld, clock: ManualClock) -> Dispatcher:
    return Dispatcher(build_registry(world), store=":memory:", clock=clock)


def test_registry_metadata(world: DemoWorld) -> None:
    """Each demo tool is registered with the execution properties of the scenario."""
    reg = build_registry(world)
    assert reg.names == [
        "list_drivers",
        "get_order",
        "list_orders",
        "refresh_drivers",
        "unassign_driver",
        "assign_driver",
        "send_message",
        "cancel_order",
    ]
    assert [t.name for t in reg if t.parallel_safe] == ["list_drivers", "get_order", "list_orders", "refresh_drivers"]
    assert [t.name for t in reg if t.needs_approval] == ["cancel_order"]
    assign = reg["assign_driver"]
    assert assign.quota is not None
    assert (assign.quota.limit, assign.quota.per) == (3, "driver_id")
    assert assign.requires_fresh_state is not None
    assert (assign.requires_fresh_state.resource, assign.requires_fresh_state.max_age_s) == ("drivers", 30.0)
    assert assign.compensate == "unassign_driver"
    assert reg["refresh_drivers"].refreshes == "drivers"
    assert reg["send_message"].idempotency_fields == ("to", "subject")
    assert {t.name: dict(t.schema) for t in reg} == SCHEMAS
    assert {t.source for t in reg} == {"tooldispatch.tools.demo"}
    assert reg.warnings == []


def test_adds_to_given_registry(world: DemoWorld) -> None:
    """build_registry adds to a registry passed in and returns it."""
    reg = Registry()
    assert build_registry(world, reg) is reg
    assert len(reg) == 8


def test_assign_needs_fresh_drivers(d: Dispatcher, clock: ManualClock, world: DemoWorld) -> None:
    """Assigning is refused until drivers were refreshed in the session, and again 30 s later."""
    args = {"driver_id": "d-north-1", "order_id": "o-101"}
    assert d.dispatch("assign_driver", args, session_id="s").reason == "stale_state_must_refresh"
    assert d.dispatch("refresh_drivers", {"zone": "north"}, session_id="s").status == "ok"
    clock.advance(31)
    assert d.dispatch("assign_driver", args, session_id="s").reason == "stale_state_must_refresh"
    d.dispatch("refresh_drivers", {"zone": "north"}, session_id="s")
    assert d.dispatch("assign_driver", args, session_id="s").status == "ok"
    assert world.count_effects() == 1


def test_quota_three_per_driver(d: Dispatcher, world: DemoWorld) -> None:
    """A fourth assignment of the same driver is rejected by quota before the tool runs."""
    d.dispatch("refresh_drivers", {"zone": "north"}, session_id="s")
    results = [
        d.dispatch("assign_driver", {"driver_id": "d-north-1", "order_id": o}, session_id="s")
        for o in ("o-101", "o-102", "o-103")
    ]
    assert [r.status for r in results] == ["ok", "ok", "ok"]
    d.dispatch("unassign_driver", {"driver_id": "d-north-1", "order_id": "o-101"}, session_id="s")
    d.dispatch("refresh_drivers", {"zone": "north"}, session_id="s2")
    fourth = d.dispatch("assign_driver", {"driver_id": "d-north-1", "order_id": "o-101"}, session_id="s2")
    assert (fourth.status, fourth.reason) == ("rejected", "quota_exceeded")
    assert world.count_effects("assign_driver") == 3


def test_message_idempotent_on_to_and_subject(d: Dispatcher, world: DemoWorld) -> None:
    """The same message is sent once; the same recipient and subject with another body is a mismatch."""
    args = {"to": "c-101", "subject": "ETA", "body": "10 minutes"}
    first = d.dispatch("send_message", args, session_id="s")
    replay = d.dispatch("send_message", args, session_id="s")
    other = d.dispatch("send_message", {**args, "body": "20 minutes"}, session_id="s")
    assert [(r.status, r.reason) for r in (first, replay, other)] == [
        ("ok", None),
        ("ok", "idempotent_replay"),
        ("rejected", "idempotency_mismatch"),
    ]
    assert replay.content == first.content
    assert world.outbox() == [{"id": 1, "to": "c-101", "subject": "ETA", "body": "10 minutes"}]


def test_cancel_waits_for_approval(d: Dispatcher, world: DemoWorld) -> None:
    """cancel_order is suspended until approved; approval runs it once."""
    waiting = d.dispatch("cancel_order", {"order_id": "o-202", "reason": "customer request"}, session_id="s")
    assert waiting.status == "awaiting_approval"
    assert world.get_order("o-202")["status"] == "pending"
    assert waiting.approval_id is not None
    done = d.approve(waiting.approval_id)
    assert json.loads(done.content) == {"order_id": "o-202", "status": "cancelled", "reason": "customer request"}
    assert world.count_effects("cancel_order") == 1


def test_rollback_unassigns_in_reverse(d: Dispatcher, world: DemoWorld) -> None:
    """Rolling back a session unassigns its assignments, newest first."""
    d.dispatch("refresh_drivers", {"zone": "east"}, session_id="s")
    d.dispatch("assign_driver", {"driver_id": "d-east-1", "order_id": "o-301"}, session_id="s")
    d.dispatch("assign_driver", {"driver_id": "d-east-2", "order_id": "o-302"}, session_id="s")
    results = d.rollback("s")
    assert [r.status for r in results] == ["ok", "ok"]
    assert [(e.tool, e.target) for e in world.audit()] == [
        ("assign_driver", "o-301"),
        ("assign_driver", "o-302"),
        ("unassign_driver", "o-302"),
        ("unassign_driver", "o-301"),
    ]
    assert {o["status"] for o in world.orders().values()} == {"pending"}


def test_business_error_reaches_the_model(d: Dispatcher) -> None:
    """A ToolError from the world becomes a permanent tool_error envelope with the world's message."""
    d.dispatch("refresh_drivers", {"zone": "north"}, session_id="s")
    result = d.dispatch("assign_driver", {"driver_id": "d-north-3", "order_id": "o-101"}, session_id="s")
    env = json.loads(result.content)
    assert (result.status, result.reason) == ("error", "tool_error")
    assert env["message"] == (
        "assign_driver failed: driver d-north-3 is off shift; call refresh_drivers and pick an available driver "
        "(status 409)"
    )
    assert env["recoverable"] is True
