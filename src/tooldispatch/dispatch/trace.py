"""One record per dispatched call, persisted, and exportable as an OpenTelemetry GenAI span."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

SECRET_MASK = "***"


@dataclass(frozen=True, slots=True)
class DispatchTrace:
    """What happened to one call.

    Attributes:
        id: the trace id (32 hex digits; also the OpenTelemetry trace id).
        session_id: the session (saga, quota and freshness scope).
        tool: the tool name as called (possibly unknown).
        params: the arguments as validated (masked for ``sensitive_fields``).
        trigger: what caused the call (e.g. ``model``, ``approval``, ``compensation``).
        status: ``ok``, ``error``, ``rejected`` or ``awaiting_approval``.
        reason: why, when not plainly ``ok`` (``timeout``, ``quota_exceeded``, ``idempotent_replay``...).
        attempts: how many times the tool function was invoked.
        retried: whether a retry happened.
        repairs: repair notes passed by the agent loop or made at validation.
        latencies: seconds per phase: ``admission`` (everything before invocation), ``tool`` (all attempts),
            ``total``; ``model`` and ``reasoning`` when the agent loop passed them.
        started_at: wall time the call reached the dispatcher.
        ended_at: wall time the result was ready.
        call_id: the model's tool-call id, when given.
        version: the tool's version.
        idempotency_key: the key used, for side-effecting tools.
        bounded_chars: characters cut from the result (0 when it fit).
        possibly_running: a timed-out call whose thread could not be stopped.
        approval_id: the approval this call waited for or came from.
        error_type: a low-cardinality error class (the OpenTelemetry ``error.type``).
        message: the error message, for failed calls.
        compensation_of: for compensations, the trace id of the call being undone.
    """

    id: str
    session_id: str
    tool: str
    params: Mapping[str, Any]
    trigger: str
    status: str
    reason: str | None
    attempts: int
    retried: bool
    repairs: tuple[Any, ...]
    latencies: Mapping[str, float]
    started_at: float
    ended_at: float
    call_id: str | None = None
    version: str | None = None
    idempotency_key: str | None = None
    bounded_chars: int = 0
    possibly_running: bool = False
    approval_id: str | None = None
    error_type: str | None = None
    message: str | None = None
    compensation_of: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable form (``from_dict`` reads it back)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["params"] = dict(self.params)
        out["latencies"] = dict(self.latencies)
        out["repairs"] = [r.to_dict() if hasattr(r, "to_dict") else r for r in self.repairs]
        out["extra"] = dict(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DispatchTrace:
        """Rebuild a trace from ``to_dict`` output (unknown keys are ignored)."""
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        values["repairs"] = tuple(values.get("repairs") or ())
        return cls(**values)

    def to_otel(self) -> dict[str, Any]:
        """Export as an OpenTelemetry GenAI ``execute_tool`` span (the SDK's JSON span layout).

        Attributes follow the GenAI semantic conventions (``gen_ai.operation.name``, ``gen_ai.tool.name``,
        ``gen_ai.tool.call.id``, ``gen_ai.tool.type``, ``error.type`` on failures); dispatch details go
        under ``tooldispatch.*``. Arguments and results are not exported (they are opt-in and may be
        sensitive).
        """
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": self.tool,
            "gen_ai.tool.call.id": self.call_id or self.id,
            "gen_ai.tool.type": "function",
            "tooldispatch.session.id": self.session_id,
            "tooldispatch.trigger": self.trigger,
            "tooldispatch.status": self.status,
            "tooldispatch.attempts": self.attempts,
            "tooldispatch.retried": self.retried,
            "tooldispatch.bounded_chars": self.bounded_chars,
        }
        if self.version is not None:
            attributes["tooldispatch.tool.version"] = self.version
        if self.reason is not None:
            attributes["tooldispatch.reason"] = self.reason
        for phase, seconds in sorted(self.latencies.items()):
            attributes[f"tooldispatch.latency.{phase}_s"] = seconds
        failed = self.status in ("error", "rejected")
        if failed:
            attributes["error.type"] = self.error_type or self.reason or "error"
        status: dict[str, Any] = {"status_code": "ERROR" if failed else "OK" if self.status == "ok" else "UNSET"}
        if failed and self.message:
            status["description"] = self.message
        return {
            "name": f"execute_tool {self.tool}",
            "context": {"trace_id": f"0x{self.id}", "span_id": f"0x{_span_id(self.id)}", "trace_state": "[]"},
            "kind": "SpanKind.INTERNAL",
            "parent_id": None,
            "start_time": _iso(self.started_at),
            "end_time": _iso(self.ended_at),
            "status": status,
            "attributes": attributes,
            "events": [],
            "links": [],
            "resource": {"attributes": {"service.name": "tooldispatch"}, "schema_url": ""},
        }


def _span_id(trace_id: str) -> str:
    return hashlib.sha256(trace_id.encode()).hexdigest()[:16]


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def mask(params: Mapping[str, Any], sensitive: frozenset[str]) -> dict[str, Any]:
    """Return ``params`` with the values of ``sensitive`` keys replaced by a mask."""
    return {k: (SECRET_MASK if k in sensitive else v) for k, v in params.items()}
