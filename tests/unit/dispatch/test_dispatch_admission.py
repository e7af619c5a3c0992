"""Admission: unknown tools, quotas, stale state and approval, each with its reason and suggestion."""

from __future__ import annotations

import json

from tooldispatch.dispatch import Dispatcher, ManualClock
from tooldispatch.dispatch.admission import admit_freshness, admit_name, admit_quota, nearest_names

from .conftest import World


def test_unknown_tool_is_a_hallucination_with_nearest_names(dispatcher: Dispatcher, world: World) -> None:
    """An unknown name is rejected as tool_hallucination and the suggestion names the closest tools."""
    r = dispatcher.dispatch("asign_driver", {"driver_id": "d1", "order_id": "o1"}, session_id="s1")
    assert (r.status, r.reason) == ("rejected", "tool_hallucination")
    body = json.loads(r.content)
    assert body == {
        "error": "tool_hallucination",
        "tool": "asign_driver",
        "message": "there is no tool named 'asign_driver'",
        "recoverable": True,
        "attempts": 0,
        "retried": False,
        "suggestion": "did you mean 'assign_driver' or 'unassign_driver'? Call only the declared tools.",
    }
    assert sum(world.calls.values()) == 0


def test_nearest_names_without_any_close_name_lists_nothing() -> None:
    """A name unlike every tool gets no 'did you mean' and the suggestion lists the available tools."""
    assert nearest_names("zzzz", ["list_drivers", "send_message"]) == []
    verdict = admit_name("zzzz", ["list_drivers", "send_message"])
    assert verdict.suggestion == "available tools: list_drivers, send_message Call only the declared tools."


def test_quota_per_business_resource(dispatcher: Dispatcher, world: World) -> None:
    """assign_driver runs at most 3 times per driver_id; the 4th call for d1 is rejected, d2 still runs."""
    dispatcher.dispatch("refresh_drivers", {}, session_id="s1")
    for order in ("o1", "o2", "o3"):
        assert dispatcher.dispatch("assign_driver", {"driver_id": "d1", "order_id": order}, session_id="s1").ok
    r = dispatcher.dispatch("assign_driver", {"driver_id": "d1", "order_id": "o4"}, session_id="s1")
    assert (r.status, r.reason) == ("rejected", "quota_exceeded")
    assert json.loads(r.content)["message"] == (
        'assign_driver may run at most 3 time(s) for driver_id="d1"; it already ran 3 time(s)'
    )
    assert dispatcher.dispatch("assign_driver", {"driver_id": "d2", "order_id": "o4"}, session_id="s1").ok
    assert world.calls["assign_driver"] == 4


def test_quota_per_resource_spans_sessions(dispatcher: Dispatcher) -> None:
    """A per-resource quota counts across sessions: the resource is shared."""
    for i, session in enumerate(("a", "b", "c")):
        dispatcher.dispatch("refresh_drivers", {}, session_id=session)
        assert dispatcher.dispatch("assign_driver", {"driver_id": "d1", "order_id": f"o{i}"}, session_id=session).ok
    dispatcher.dispatch("refresh_drivers", {}, session_id="d")
    r = dispatcher.dispatch("assign_driver", {"driver_id": "d1", "order_id": "o9"}, session_id="d")
    assert r.reason == "quota_exceeded"


def test_quota_per_session(world: World, clock: ManualClock) -> None:
    """A quota without 'per' counts per session: a new session starts again at zero."""
    from tooldispatch.dispatch import Registry

    reg = Registry()
    reg.register("ping", world.refresh, schema={"type": "object", "properties": {}}, read_only=True, quota={"limit": 2})
    d = Dispatcher(reg, clock=clock)
    assert [d.dispatch("ping", {}, session_id="s1").status for _ in range(3)] == ["ok", "ok", "rejected"]
    assert d.dispatch("ping", {}, session_id="s2").ok
    assert json.loads(d.dispatch("ping", {}, session_id="s1").content)["suggestion"] == (
        "do not call it again in this session; tell the user the limit was reached"
    )


def test_replays_and_rejections_do_not_use_quota(dispatcher: Dispatcher, world: World) -> None:
    """Only invocations count: an idempotent replay does not use up the quota."""
    dispatcher.dispatch("refresh_drivers", {}, session_id="s1")
    for _ in range(5):
        assert dispatcher.dispatch("assign_driver", {"driver_id": "d1", "order_id": "o1"}, session_id="s1").ok
    assert world.calls["assign_driver"] == 1
    assert dispatcher.dispatch("assign_driver", {"driver_id": "d1", "order_id": "o2"}, session_id="s1").ok


def test_stale_state_names_the_refreshing_tool(dispatcher: Dispatcher, world: World) -> None:
    """Without a refresh in this session the call is rejected and the suggestion names refresh_drivers."""
    r = dispatcher.dispatch("assign_driver", {"driver_id": "d1", "order_id": "o1"}, session_id="s1")
    assert (r.status, r.reason) == ("rejected", "stale_state_must_refresh")
    body = json.loads(r.content)
    assert (
        body["message"] == "assign_driver needs 'drivers' refreshed within 30 s; it was never refreshed in this session"
    )
    assert body["suggestion"] == "call refresh_drivers first, then call assign_driver again"
    assert world.calls["assign_driver"] == 0


def test_freshness_expires_with_max_age(dispatcher: Dispatcher, clock: ManualClock) -> None:
    """A refresh 31 s ago is too old for max_age_s=30; 30 s exactly is still fresh."""
    dispatcher.dispatch("refresh_drivers", {}, session_id="s1")
    clock.advance(30)
    assert dispatcher.dispatch("assign_driver", {"driver_id": "d1", "order_id": "o1"}, session_id="s1").ok
    clock.advance(1)
    r = dispatcher.dispatch("assign_driver", {"driver_id": "d1", "order_id": "o2"}, session_id="s1")
    assert r.reason == "stale_state_must_refresh"
    assert json.loads(r.content)["message"] == "assign_driver needs 'drivers' refreshed within 30 s; it is 31 s old"


def test_freshness_is_per_session(dispatcher: Dispatcher) -> None:
    """A refresh in one session does not make the state fresh for another."""
    dispatcher.dispatch("refresh_drivers", {}, session_id="s1")
    r = dispatcher.dispatch("assign_driver", {"driver_id": "d1", "order_id": "o1"}, session_id="s2")
    assert r.reason == "stale_state_must_refresh"


def test_approval_suspends_and_persists(dispatcher: Dispatcher, world: World) -> None:
    """A requires_approval tool does not run; the call is stored as pending with an approval id."""
    r = dispatcher.dispatch("cancel_order", {"order_id": "o1"}, session_id="s1")
    assert (r.status, r.reason) == ("awaiting_approval", "awaiting_approval")
    assert r.approval_id is not None and r.approval_id.startswith("apr_")
    assert json.loads(r.content)["approval_id"] == r.approval_id
    pending = dispatcher.approvals()
    assert [(p.id, p.tool, p.args, p.state) for p in pending] == [
        (r.approval_id, "cancel_order", {"order_id": "o1"}, "pending")
    ]
    assert world.calls["cancel_order"] == 0


def test_pure_quota_and_freshness_decisions() -> None:
    """The pure decisions admit below the limit and within the age, and reject at them."""
    from tooldispatch.dispatch import Registry

    reg = Registry()
    tool = reg.register(
        "t",
        lambda a: a,
        schema={"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
        read_only=True,
        quota={"limit": 1, "per": "a"},
        requires_fresh_state={"resource": "x", "max_age_s": 5},
    )
    assert admit_quota(tool, {"a": "k"}, 0).outcome == "admit"
    assert admit_quota(tool, {"a": "k"}, 1).reason == "quota_exceeded"
    assert admit_freshness(tool, 100.0, 105.0, "r").outcome == "admit"
    assert admit_freshness(tool, 100.0, 105.5, "r").reason == "stale_state_must_refresh"
    assert admit_freshness(tool, None, 0.0, None).suggestion == "refresh x first"
