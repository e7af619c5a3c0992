"""The saga journal: each successful call of a tool with ``compensate=`` records its inverse.

A session is one saga. ``Dispatcher.rollback(session_id)``, or a later failure of a side-effecting call
in the same session, runs the pending inverses newest first. Each entry is marked ``compensated`` or
``failed`` once it ran, so it never runs twice; failures are reported, never swallowed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tooldispatch.dispatch.registry import ToolDef
from tooldispatch.store import StateStore


def inverse_args(inverse: ToolDef, args: Mapping[str, Any], result: Any) -> dict[str, Any]:
    """Arguments for the inverse: each of its parameters taken from the call's arguments, else its result.

    Args:
        inverse: the compensating tool.
        args: the arguments of the call being undone.
        result: what that call returned (used when it is an object).
    """
    out: dict[str, Any] = {}
    for name in inverse.properties:
        if name in args:
            out[name] = args[name]
        elif isinstance(result, Mapping) and name in result:
            out[name] = result[name]
    return out


@dataclass(frozen=True, slots=True)
class SagaEntry:
    """One journal entry."""

    id: int
    session_id: str
    trace_id: str
    tool: str
    inverse_tool: str
    inverse_args: dict[str, Any]
    idempotency_key: str | None
    state: str
    compensation_trace_id: str | None


class SagaJournal:
    """The saga journal in the state store."""

    def __init__(self, store: StateStore) -> None:
        self._store = store

    def record(
        self,
        *,
        session_id: str,
        trace_id: str,
        tool: str,
        inverse_tool: str,
        args: Mapping[str, Any],
        idempotency_key: str | None,
        now: float,
    ) -> int:
        """Add a pending compensation; returns its id."""
        with self._store.transaction() as conn:
            row = conn.execute(
                "INSERT INTO saga (session_id, trace_id, tool, inverse_tool, inverse_args, idempotency_key, state, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?) RETURNING id",
                (session_id, trace_id, tool, inverse_tool, json.dumps(dict(args)), idempotency_key, now),
            ).fetchone()
            return int(row[0])

    def pending(self, session_id: str) -> list[SagaEntry]:
        """Pending compensations of a session, newest first (the order they must run in)."""
        rows = self._store.fetchall(
            "SELECT id, session_id, trace_id, tool, inverse_tool, inverse_args, idempotency_key, state, "
            "compensation_trace_id FROM saga WHERE session_id = ? AND state = 'pending' ORDER BY id DESC",
            (session_id,),
        )
        return [SagaEntry(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7], r[8]) for r in rows]

    def take(self, entry_id: int) -> bool:
        """Claim a pending entry for compensation (take-once); False when another caller has it."""
        return (
            self._store.execute("UPDATE saga SET state = 'running' WHERE id = ? AND state = 'pending'", (entry_id,))
            == 1
        )

    def finish(self, entry_id: int, *, ok: bool, trace_id: str) -> None:
        """Mark an entry ``compensated`` or ``failed``."""
        self._store.execute(
            "UPDATE saga SET state = ?, compensation_trace_id = ? WHERE id = ?",
            ("compensated" if ok else "failed", trace_id, entry_id),
        )

    def entries(self, session_id: str) -> list[SagaEntry]:
        """Every entry of a session, oldest first."""
        rows = self._store.fetchall(
            "SELECT id, session_id, trace_id, tool, inverse_tool, inverse_args, idempotency_key, state, "
            "compensation_trace_id FROM saga WHERE session_id = ? ORDER BY id",
            (session_id,),
        )
        return [SagaEntry(r[0], r[1], r[2], r[3], r[4], json.loads(r[5]), r[6], r[7], r[8]) for r in rows]


def compensation_key(entry: SagaEntry) -> str:
    """The idempotency key of a compensation: one per journal entry, so it runs at most once."""
    return hashlib.sha256(f"saga:{entry.session_id}:{entry.id}".encode()).hexdigest()
