"""The saga journal: each successful call of a tool with ``compensate=`` records its inverse.

A session is one saga. ``Dispatcher.rollback(session_id)``, or a later failure of a side-effecting call
in the same session, runs the pending inverses newest first. Each entry is marked ``compensated`` or
``failed`` once it ran, so it never runs twice; failures are reported, never swallowed.

An entry also ends without the rollback running it when a later successful call acts on the same thing
(``resource_of``), in any session: ``compensated`` when that call was the entry's inverse (the model undid
the effect itself), ``superseded`` otherwise (another effect replaced it, e.g. the order was cancelled).
Its inverse would then undo nothing the entry recorded, or something it did not do.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tooldispatch.dispatch.registry import Registry, ToolDef
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


def resource_of(registry: Registry, tool: ToolDef, args: Mapping[str, Any], result: Any = None) -> str | None:
    """What a side effect acted on, as a digest shared by every call that acts on the same thing; or None.

    - A tool that declares ``acts_on``: those arguments (the same name means the same kind of thing in every
      tool, so ``cancel_order(order_id)`` and ``assign_driver(driver_id, order_id)`` with
      ``acts_on=["order_id"]`` act on the same order).
    - Otherwise a tool with a ``compensate`` inverse, and the inverse itself, act on the inverse's identifying
      arguments (its ``idempotency_fields``, else all its parameters), taken for the forward call as the saga
      would pass them (``inverse_args``). In a pair whose tools are each other's inverse, the one whose name
      sorts first anchors the pair.
    - Any other tool: None; the dispatcher knows of nothing else that touches what it changed.

    Args:
        registry: the tools (to find the tools a tool is the inverse of).
        tool: the tool called.
        args: the call's validated arguments.
        result: what the call returned (for inverse arguments taken from the result).
    """
    if tool.acts_on is not None:
        return _digest("acts_on", {name: args.get(name) for name in tool.acts_on})
    undoes = [t for t in registry if t.compensate == tool.name]
    if tool.compensate is not None and not (undoes and tool.compensate < tool.name):
        inverse = registry[tool.compensate]
        return _digest(inverse.name, _identity(inverse, inverse_args(inverse, args, result)))
    if undoes:
        return _digest(tool.name, _identity(tool, args))
    return None


def _identity(inverse: ToolDef, values: Mapping[str, Any]) -> dict[str, Any]:
    fields = inverse.idempotency_fields if inverse.idempotency_fields is not None else tuple(inverse.properties)
    return {name: values.get(name) for name in fields}


def _digest(anchor: str, ident: Mapping[str, Any]) -> str:
    text = json.dumps([anchor, dict(ident)], sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


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
        resource: str | None = None,
    ) -> int:
        """Add a pending compensation, with what its call acted on (``resource_of``); returns its id."""
        with self._store.transaction() as conn:
            row = conn.execute(
                "INSERT INTO saga (session_id, trace_id, tool, inverse_tool, inverse_args, idempotency_key, state, "
                "created_at, resource) VALUES (?, ?, ?, ?, ?, ?, 'pending', ?, ?) RETURNING id",
                (session_id, trace_id, tool, inverse_tool, json.dumps(dict(args)), idempotency_key, now, resource),
            ).fetchone()
            return int(row[0])

    def supersede(self, resource: str, *, tool: str, trace_id: str) -> list[str]:
        """End every pending entry, in any session, whose effect a later successful call on the same resource
        undid (``tool`` is the entry's inverse: ``compensated``) or replaced (``superseded``).

        Returns:
            The trace ids of the calls whose entries ended.
        """
        rows = self._store.fetchall(
            "UPDATE saga SET state = CASE WHEN inverse_tool = ? THEN 'compensated' ELSE 'superseded' END, "
            "compensation_trace_id = ? WHERE resource = ? AND state = 'pending' RETURNING trace_id",
            (tool, trace_id, resource),
        )
        return [str(r[0]) for r in rows]

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
        """Mark an entry ``compensated`` or ``failed`` (the rollback ran its inverse)."""
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
