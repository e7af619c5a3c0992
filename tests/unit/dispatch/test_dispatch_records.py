"""Bounding, traces (persisted, OpenTelemetry export) and metrics thresholds."""

from __future__ import annotations

import json

from tooldispatch.dispatch import Dispatcher, ManualClock, Registry
from tooldispatch.dispatch.bounding import bound, marker
from tooldispatch.dispatch.metrics import THRESHOLDS, rates_for
from tooldispatch.dispatch.trace import DispatchTrace

from .conftest import World


def test_short_text_is_not_bounded() -> None:
    """A text within the limit comes back unchanged with nothing omitted."""
    assert (bound("abc", 200, "t1").text, bound("abc", 200, "t1").omitted) == ("abc", 0)


def test_bound_keeps_head_and_tail_with_an_exact_marker() -> None:
    """1,000 characters bounded to 200: 40 % head, 60 % tail, and a marker stating the omitted count."""
    text = "".join(chr(ord("a") + i % 26) for i in range(1000))
    out = bound(text, 200, "t1")
    mark = marker(out.omitted, "t1")
    assert mark == "…[849 characters omitted; full result: trace t1]…"
    room = 200 - len(mark)
    assert out.text == text[: int(room * 0.4)] + mark + text[-(room - int(room * 0.4)) :]
    assert (len(out.text), out.omitted) == (200, 849)


def test_large_result_is_bounded_and_kept_in_full() -> None:
    """A 5,000-character result reaches the model bounded; the store keeps the full text under the trace id."""
    reg = Registry()
    reg.register(
        "big", lambda: "x" * 5000, schema={"type": "object", "properties": {}}, read_only=True, result_max_chars=500
    )
    d = Dispatcher(reg)
    r = d.dispatch("big", {})
    assert len(r.content) == 500
    assert f"characters omitted; full result: trace {r.trace.id}]" in r.content
    assert r.trace.bounded_chars == 5002 - (500 - len(marker(r.trace.bounded_chars, r.trace.id)))
    assert d.full_result(r.trace.id) == json.dumps("x" * 5000)


def test_trace_is_persisted_and_reloaded(world: World, clock: ManualClock) -> None:
    """The trace returned equals the one read back from the store."""
    from .conftest import build_registry

    d = Dispatcher(build_registry(world), clock=clock)
    r = d.dispatch(
        "send_message", {"to": "a", "subject": "b", "body": "c"}, session_id="s1", trigger="user", call_id="call_7"
    )
    again = d.trace(r.trace.id)
    assert again is not None
    assert again.to_dict() == r.trace.to_dict()
    assert (again.session_id, again.tool, again.trigger, again.call_id, again.status) == (
        "s1",
        "send_message",
        "user",
        "call_7",
        "ok",
    )


def test_sensitive_fields_are_masked_in_traces() -> None:
    """Arguments declared sensitive appear masked in the trace, while the tool receives the real value."""
    seen: list[str] = []
    reg = Registry()
    reg.register(
        "login",
        lambda user, token: seen.append(token) or {},
        schema={"type": "object", "properties": {"user": {"type": "string"}, "token": {"type": "string"}}},
        read_only=True,
        sensitive_fields=["token"],
    )
    d = Dispatcher(reg)
    r = d.dispatch("login", {"user": "u", "token": "s3cret"})
    assert (seen, dict(r.trace.params)) == (["s3cret"], {"user": "u", "token": "***"})
    d.flush()
    stored = d.store.fetchone("SELECT data FROM traces WHERE id = ?", (r.trace.id,))
    assert stored is not None and "s3cret" not in stored[0]


def _trace(**changes: object) -> DispatchTrace:
    base = dict(
        id="0af7651916cd43dd8448eb211c80319c",
        session_id="s1",
        tool="assign_driver",
        params={"driver_id": "d1"},
        trigger="model",
        status="ok",
        reason=None,
        attempts=1,
        retried=False,
        repairs=(),
        latencies={"admission": 0.001, "tool": 0.5, "total": 0.502},
        started_at=1_700_000_000.0,
        ended_at=1_700_000_000.5,
        call_id="call_1",
        version="2",
    )
    base.update(changes)
    return DispatchTrace(**base)  # type: ignore[arg-type]


def test_otel_export_shape_for_success() -> None:
    """A successful call exports as an execute_tool span with the GenAI attributes and OK status."""
    span = _trace().to_otel()
    assert span == {
        "name": "execute_tool assign_driver",
        "context": {
            "trace_id": "0x0af7651916cd43dd8448eb211c80319c",
            "span_id": span["context"]["span_id"],
            "trace_state": "[]",
        },
        "kind": "SpanKind.INTERNAL",
        "parent_id": None,
        "start_time": "2023-11-14T22:13:20.000000Z",
        "end_time": "2023-11-14T22:13:20.500000Z",
        "status": {"status_code": "OK"},
        "attributes": {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "assign_driver",
            "gen_ai.tool.call.id": "call_1",
            "gen_ai.tool.type": "function",
            "tooldispatch.session.id": "s1",
            "tooldispatch.trigger": "model",
            "tooldispatch.status": "ok",
            "tooldispatch.attempts": 1,
            "tooldispatch.retried": False,
            "tooldispatch.bounded_chars": 0,
            "tooldispatch.tool.version": "2",
            "tooldispatch.latency.admission_s": 0.001,
            "tooldispatch.latency.tool_s": 0.5,
            "tooldispatch.latency.total_s": 0.502,
        },
        "events": [],
        "links": [],
        "resource": {"attributes": {"service.name": "tooldispatch"}, "schema_url": ""},
    }
    assert len(span["context"]["span_id"]) == 18
    json.dumps(span)


def test_otel_export_for_errors_sets_error_type() -> None:
    """A failed call sets error.type (low cardinality) and an ERROR status with the message."""
    span = _trace(status="error", reason="timeout", error_type="ToolTimeout", message="too slow").to_otel()
    assert span["attributes"]["error.type"] == "ToolTimeout"
    assert span["attributes"]["tooldispatch.reason"] == "timeout"
    assert span["status"] == {"status_code": "ERROR", "description": "too slow"}
    rejected = _trace(status="rejected", reason="quota_exceeded", error_type=None).to_otel()
    assert rejected["attributes"]["error.type"] == "quota_exceeded"


def test_metric_thresholds_flag_only_above_the_line() -> None:
    """Each rate is flagged strictly above its threshold: 15 % validation is fine, 16 % is flagged."""
    assert THRESHOLDS == {
        "validation_failure": 0.15,
        "timeout": 0.05,
        "retry": 0.10,
        "idempotent_hit": 0.05,
        "bounding": 0.20,
        "unexpected_exception": 0.0,
        "hallucination": 0.0,
    }
    at = rates_for("t", 100, {"validation_failure": 15, "timeout": 5, "retry": 10, "idempotent_hit": 5, "bounding": 20})
    assert at.flags == ()
    above = rates_for(
        "t",
        100,
        {
            "validation_failure": 16,
            "timeout": 6,
            "retry": 11,
            "idempotent_hit": 6,
            "bounding": 21,
            "unexpected_exception": 1,
            "hallucination": 1,
        },
    )
    assert above.flags == (
        "validation_failure",
        "timeout",
        "retry",
        "idempotent_hit",
        "bounding",
        "unexpected_exception",
        "hallucination",
    )
    assert rates_for("t", 0, {}).rates["timeout"] == 0.0


def test_metrics_from_dispatches(world: World) -> None:
    """Rates are computed per tool from persisted traces; unknown names count as hallucinations."""
    from .conftest import build_registry

    d = Dispatcher(build_registry(world))
    msg = {"to": "a", "subject": "b", "body": "c"}
    for _ in range(3):
        d.dispatch("send_message", msg)
    d.dispatch("send_message", {"to": 1})
    d.dispatch("sendmessage", msg)
    report = d.metrics()
    send = report["send_message"]
    assert (send.calls, send.counts["idempotent_hit"], send.counts["validation_failure"]) == (4, 2, 1)
    assert (send.rates["idempotent_hit"], send.rates["validation_failure"]) == (0.5, 0.25)
    assert send.flags == ("validation_failure", "idempotent_hit")
    assert report["sendmessage"].flags == ("hallucination",)
    assert report.overall.calls == 5
    assert d.metrics(tool="send_message").overall.calls == 4
    assert report.flagged[-1] == (
        "sendmessage: hallucination 100.0% (threshold 0%) — the model called a tool that does not exist"
    )


def test_read_only_traces_are_written_behind_side_effecting_ones_at_once(world: World) -> None:
    """A side-effecting call's trace is in the file when the call returns; a read-only one after a flush."""
    from .conftest import build_registry

    d = Dispatcher(build_registry(world))
    ro = d.dispatch("refresh_drivers", {}, session_id="s1")
    se = d.dispatch("send_message", {"to": "a", "subject": "b", "body": "c"}, session_id="s1")
    ro2 = d.dispatch("refresh_drivers", {}, session_id="s1")
    stored = {row[0] for row in d.store.fetchall("SELECT id FROM traces")}
    assert stored == {ro.trace.id, se.trace.id}
    assert [t.id for t in d.traces(session_id="s1")] == [ro.trace.id, se.trace.id, ro2.trace.id]
