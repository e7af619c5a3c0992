"""Admission state and approvals in the state store: quota counters, freshness stamps, pending approvals,
pinned description hashes, and persisted traces.

Traces of side-effecting calls (and of calls to unknown tools) are written before the result returns.
Traces of read-only calls are written behind, in batches: at the latest after ``flush_every`` traces or
``flush_after_s`` seconds, before any read of traces, and when the dispatcher closes or the process exits.
A crash can lose at most that window of read-only traces; nothing that guards a side effect is buffered.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tooldispatch.dispatch.idempotency import canonical_json
from tooldispatch.dispatch.registry import ToolDef
from tooldispatch.dispatch.trace import DispatchTrace
from tooldispatch.store import StateStore


@dataclass(frozen=True, slots=True)
class PendingApproval:
    """A suspended call.

    Attributes:
        id: the approval id to pass to ``approve`` or ``deny``.
        session_id: the session of the call.
        tool: the tool to run.
        args: the arguments as validated.
        trigger: what caused the call.
        state: ``pending``, ``approved`` or ``denied``.
        reason: the denial reason.
        trace_id: the trace of the suspended call.
        created_at: wall time it was suspended.
        decided_at: wall time a person decided.
    """

    id: str
    session_id: str
    tool: str
    args: dict[str, Any]
    trigger: str | None
    state: str
    reason: str | None
    trace_id: str
    created_at: float
    decided_at: float | None


_TRACE_INSERT = (
    "INSERT INTO traces (id, session_id, tool, status, reason, started_at, ended_at, data, content) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET session_id = excluded.session_id, "
    "tool = excluded.tool, status = excluded.status, reason = excluded.reason, started_at = excluded.started_at, "
    "ended_at = excluded.ended_at, data = excluded.data, content = excluded.content"
)
_RESULT_INSERT = (
    "INSERT INTO trace_results (trace_id, content) VALUES (?, ?) "
    "ON CONFLICT (trace_id) DO UPDATE SET content = excluded.content"
)
# One statement counts an invocation unless the limit is reached, so workers sharing a store never exceed it.
_TAKE_QUOTA = (
    "INSERT INTO quota_usage (tool, scope, count) VALUES (?, ?, 1) "
    "ON CONFLICT (tool, scope) DO UPDATE SET count = quota_usage.count + 1 WHERE quota_usage.count < ? "
    "RETURNING count"
)
# A stamp only moves forward: a worker writing an older refresh late never makes the state look staler.
_STAMP_FRESH = (
    "INSERT INTO freshness (session_id, resource, refreshed_at) VALUES (?, ?, ?) "
    "ON CONFLICT (session_id, resource) DO UPDATE SET refreshed_at = CASE "
    "WHEN excluded.refreshed_at > freshness.refreshed_at THEN excluded.refreshed_at "
    "ELSE freshness.refreshed_at END"
)
# Insertion order: SQLite's rowid, PostgreSQL's sequence column (migration core_0003_trace_order).
_INSERTION_ORDER = {"sqlite": "rowid", "postgresql": "seq"}


class State:
    """Quota, freshness, approval, description and trace rows.

    Args:
        store: the state store.
        flush_every: buffered read-only traces that trigger a write.
        flush_after_s: age of the oldest buffered trace that triggers a write.
    """

    def __init__(self, store: StateStore, *, flush_every: int = 128, flush_after_s: float = 0.5) -> None:
        self.store = store
        self._buffer: list[tuple[DispatchTrace, str, str | None]] = []
        self._buffer_lock = threading.Lock()
        self._buffered_since = 0.0
        self._flush_every = flush_every
        self._flush_after_s = flush_after_s

    # quotas
    def quota_used(self, tool: str, scope: str) -> int:
        """Invocations counted so far under ``scope``."""
        row = self.store.fetchone("SELECT count FROM quota_usage WHERE tool = ? AND scope = ?", (tool, scope))
        return int(row[0]) if row else 0

    def take_quota(self, tool: str, scope: str, limit: int) -> int | None:
        """Atomically count one invocation; returns the previous count, or None when the limit is reached."""
        if limit <= 0:
            return None
        with self.store.transaction() as conn:
            row = conn.execute(_TAKE_QUOTA, (tool, scope, limit)).fetchone()
        return int(row[0]) - 1 if row is not None else None

    # freshness
    def refreshed_at(self, session_id: str, resource: str) -> float | None:
        """When ``resource`` was last refreshed in the session."""
        row = self.store.fetchone(
            "SELECT refreshed_at FROM freshness WHERE session_id = ? AND resource = ?", (session_id, resource)
        )
        return float(row[0]) if row else None

    def stamp_fresh(self, session_id: str, resource: str, now: float) -> None:
        """Record that ``resource`` was refreshed now (a later stamp already recorded is kept)."""
        self.store.execute(_STAMP_FRESH, (session_id, resource, now), durable=False)

    # approvals
    def add_approval(
        self,
        approval_id: str,
        *,
        session_id: str,
        tool: str,
        args: Mapping[str, Any],
        trigger: str,
        trace_id: str,
        now: float,
    ) -> None:
        """Persist a suspended call."""
        self.store.execute(
            "INSERT INTO approvals (id, session_id, tool, args, trigger, state, trace_id, created_at) "
            "VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)",
            (approval_id, session_id, tool, canonical_json(dict(args)), trigger, trace_id, now),
        )

    def pending_for(self, session_id: str, tool: str, args: Mapping[str, Any]) -> PendingApproval | None:
        """The pending approval of the same call (session, tool, arguments), if one is waiting."""
        rows = self._approvals(
            "WHERE state = 'pending' AND session_id = ? AND tool = ? AND args = ?",
            (session_id, tool, canonical_json(dict(args))),
        )
        return rows[0] if rows else None

    def decide_approval(self, approval_id: str, state: str, reason: str | None, now: float) -> PendingApproval | None:
        """Move a pending approval to ``state`` (take-once); None when it is unknown or already decided."""
        with self.store.transaction() as conn:
            changed = conn.execute(
                "UPDATE approvals SET state = ?, reason = ?, decided_at = ? WHERE id = ? AND state = 'pending'",
                (state, reason, now, approval_id),
            ).rowcount
            if changed != 1:
                return None
        return self.approval(approval_id)

    def approval(self, approval_id: str) -> PendingApproval | None:
        """One approval record."""
        rows = self._approvals("WHERE id = ?", (approval_id,))
        return rows[0] if rows else None

    def approvals(self, state: str | None = "pending") -> list[PendingApproval]:
        """Approval records, oldest first (``state=None`` for all)."""
        if state is None:
            return self._approvals("", ())
        return self._approvals("WHERE state = ?", (state,))

    def _approvals(self, where: str, params: tuple[Any, ...]) -> list[PendingApproval]:
        rows = self.store.fetchall(
            "SELECT id, session_id, tool, args, trigger, state, reason, trace_id, created_at, decided_at "
            f"FROM approvals {where} ORDER BY created_at, id",
            params,
        )
        return [PendingApproval(r[0], r[1], r[2], json.loads(r[3]), r[4], r[5], r[6], r[7], r[8], r[9]) for r in rows]

    # description pinning
    def pin_description(self, tool: ToolDef, now: float) -> str | None:
        """Record the tool's description hash, or report how it differs from the pinned one."""
        row = self.store.fetchone(
            "SELECT sha256, source FROM tool_descriptions WHERE name = ? AND version = ?", (tool.name, tool.version)
        )
        if row is None:
            self.store.execute(
                "INSERT INTO tool_descriptions (name, version, sha256, source, first_seen) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (name, version) DO NOTHING",
                (tool.name, tool.version, tool.description_sha256, tool.source, now),
            )
            return None
        if row[0] == tool.description_sha256:
            return None
        return (
            f"tool {tool.name!r} version {tool.version!r}: its description or schema changed since it was first "
            f"seen (sha256 {row[0][:12]} → {tool.description_sha256[:12]}); review the change and bump version= "
            "if it is intended"
        )

    # traces
    def save_trace(self, trace: DispatchTrace, content: str, full_result: str | None, *, durable: bool = True) -> None:
        """Persist a trace with the content the model saw and, when that was bounded, the full result.

        Args:
            trace: the trace.
            content: what the model saw.
            full_result: the full result when ``content`` was bounded.
            durable: write now (with anything buffered); otherwise buffer it (see the module docstring).
        """
        with self._buffer_lock:
            if not self._buffer:
                self._buffered_since = time.monotonic()
            self._buffer.append((trace, content, full_result))
            if (
                not durable
                and len(self._buffer) < self._flush_every
                and time.monotonic() - self._buffered_since < self._flush_after_s
            ):
                return
            batch, self._buffer = self._buffer, []
        self._write(batch)

    def flush(self) -> None:
        """Write every buffered trace now."""
        with self._buffer_lock:
            batch, self._buffer = self._buffer, []
        if batch and not self.store.closed:
            self._write(batch)

    def _write(self, batch: list[tuple[DispatchTrace, str, str | None]]) -> None:
        rows = [
            (
                trace.id,
                trace.session_id,
                trace.tool,
                trace.status,
                trace.reason,
                trace.started_at,
                trace.ended_at,
                json.dumps(trace.to_dict(), ensure_ascii=False, default=str),
                content,
            )
            for trace, content, _ in batch
        ]
        full = [(trace.id, result) for trace, _, result in batch if result is not None]
        if len(rows) == 1 and not full:
            self.store.execute(_TRACE_INSERT, rows[0], durable=False)
            return
        with self.store.transaction(durable=False):
            self.store.executemany(_TRACE_INSERT, rows)
            if full:
                self.store.executemany(_RESULT_INSERT, full)

    def trace(self, trace_id: str) -> DispatchTrace | None:
        """One persisted trace."""
        self.flush()
        row = self.store.fetchone("SELECT data FROM traces WHERE id = ?", (trace_id,))
        return DispatchTrace.from_dict(json.loads(row[0])) if row else None

    def content(self, trace_id: str) -> str | None:
        """The content the model saw for a call."""
        self.flush()
        row = self.store.fetchone("SELECT content FROM traces WHERE id = ?", (trace_id,))
        return str(row[0]) if row and row[0] is not None else None

    def full_result(self, trace_id: str) -> str | None:
        """The full result text of a call (the content itself when it was not bounded)."""
        self.flush()
        row = self.store.fetchone("SELECT content FROM trace_results WHERE trace_id = ?", (trace_id,))
        return str(row[0]) if row else self.content(trace_id)

    def traces(
        self, *, session_id: str | None = None, tool: str | None = None, limit: int | None = None
    ) -> list[DispatchTrace]:
        """Persisted traces, oldest first, optionally filtered."""
        self.flush()
        clauses, params = [], []
        if session_id is not None:
            clauses.append("session_id = ?")
            params.append(session_id)
        if tool is not None:
            clauses.append("tool = ?")
            params.append(tool)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        order = _INSERTION_ORDER[self.store.dialect]
        sql = f"SELECT data FROM traces {where} ORDER BY started_at, {order}"
        if limit is not None:
            newest = f"SELECT data, started_at, {order} AS r FROM traces {where} ORDER BY started_at DESC, r DESC"
            sql = f"SELECT data FROM ({newest} LIMIT {int(limit)}) AS newest ORDER BY started_at, r"
        return [DispatchTrace.from_dict(json.loads(r[0])) for r in self.store.fetchall(sql, params)]
