"""Idempotency for side-effecting tools, with the Stripe/IETF rules.

- The key is sha256 of (session, tool, canonical JSON of the identifying arguments, or all arguments).
- A completed call with the same key replays its stored result without running the tool.
- A key whose call is still in flight is a conflict (``idempotency_conflict``); so is a key whose outcome is
  unknown (a timeout, a crash, a process killed mid-call): the side effect may have happened, so the call
  is never silently re-run. The record expires with its TTL, which the dispatcher extends while the call
  may still be waiting for a worker or running (``extend``), so an in-flight record never expires first.
- The same key with different full arguments is an error (``idempotency_mismatch``).
- Failures before execution, and permanent refusals by the tool (4xx), are not stored.

A replay says the call's effect was made and still stands, so a completed record lasts only while the
dispatcher has run nothing since that changed the same thing: each record keeps what its call acted on
(``saga.resource_of``), and a later successful call acting on the same resource, in any session, ends it
(``supersede``): the compensation run by the model or by a rollback, the forward call again, or another
tool declaring the same ``acts_on``. The next identical call then runs, and the tool answers from the world.
In-flight and outcome-unknown records are never ended this way.

The in-flight record is committed before the tool is invoked, so a process killed mid-call leaves a
record that a restarted process reports as a conflict.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tooldispatch.dispatch.registry import ToolDef
from tooldispatch.store import StateStore

State = Literal["in_flight", "completed", "unknown"]


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace, so equal values hash equally."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def fingerprint(args: Mapping[str, Any]) -> str:
    """sha256 of the full arguments."""
    return hashlib.sha256(canonical_json(dict(args)).encode()).hexdigest()


def make_key(session_id: str, tool: ToolDef, args: Mapping[str, Any]) -> str:
    """The idempotency key of a call: session, tool, and the identifying (or all) arguments."""
    fields = tool.idempotency_fields
    ident = {f: args.get(f) for f in fields} if fields is not None else dict(args)
    return hashlib.sha256(canonical_json([session_id, tool.name, ident]).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Record:
    """One stored idempotency record."""

    key: str
    fingerprint: str
    state: State
    status: str | None
    reason: str | None
    content: str | None
    trace_id: str
    created_at: float
    expires_at: float


@dataclass(frozen=True, slots=True)
class Verdict:
    """What an existing record means for a new call with the same key.

    Attributes:
        action: ``replay`` the stored content, or reject as ``idempotency_conflict`` / ``idempotency_mismatch``.
        message: for the model.
        suggestion: what the model should do next.
    """

    action: Literal["replay", "idempotency_conflict", "idempotency_mismatch"]
    message: str
    suggestion: str | None = None


def judge(record: Record, new_fingerprint: str, tool: str) -> Verdict:
    """Apply the rules to an unexpired record found under a new call's key (pure)."""
    if record.fingerprint != new_fingerprint:
        return Verdict(
            "idempotency_mismatch",
            f"an earlier {tool} call with the same identifying arguments had different other arguments "
            f"(trace {record.trace_id})",
            "this would repeat the same side effect with different details; change the identifying arguments "
            "for a new action, or repeat the earlier arguments exactly",
        )
    if record.state == "in_flight":
        return Verdict(
            "idempotency_conflict",
            f"the same {tool} call started earlier (trace {record.trace_id}) and has not finished; if the "
            "process stopped mid-call, its outcome is unknown",
            "do not repeat it; check the current state with a read-only tool and tell the user",
        )
    if record.state == "unknown":
        return Verdict(
            "idempotency_conflict",
            f"the same {tool} call (trace {record.trace_id}) may or may not have taken effect: outcome unknown",
            "do not repeat it; check the current state with a read-only tool and tell the user",
        )
    return Verdict("replay", "the same call already completed; its stored result is returned")


_SELECT = (
    "SELECT key, fingerprint, state, status, reason, content, trace_id, created_at, expires_at "
    "FROM idempotency WHERE key = ?"
)
_CLAIM = (
    "INSERT INTO idempotency (key, session_id, tool, fingerprint, state, trace_id, created_at, expires_at) "
    "VALUES (?, ?, ?, ?, 'in_flight', ?, ?, ?) "
    "ON CONFLICT (key) DO UPDATE SET session_id = excluded.session_id, tool = excluded.tool, "
    "fingerprint = excluded.fingerprint, state = 'in_flight', status = NULL, reason = NULL, content = NULL, "
    "trace_id = excluded.trace_id, created_at = excluded.created_at, expires_at = excluded.expires_at "
    "WHERE idempotency.expires_at <= ? "
    "RETURNING key"
)


class IdempotencyStore:
    """Idempotency records in the state store."""

    def __init__(self, store: StateStore) -> None:
        self._store = store

    def lookup(self, key: str, now: float) -> Record | None:
        """The unexpired record for ``key``, or None (an expired one is deleted)."""
        row = self._store.fetchone(_SELECT, (key,))
        if row is None:
            return None
        record = Record(*row)
        if record.expires_at <= now:
            self._store.execute("DELETE FROM idempotency WHERE key = ? AND expires_at <= ?", (key, now))
            return None
        return record

    def claim(
        self, key: str, *, session_id: str, tool: str, fp: str, trace_id: str, now: float, ttl_s: float
    ) -> Record | None:
        """Atomically record the call as in flight; returns the existing record instead if one is there.

        The insert is committed before this returns, so it survives the process being killed. The claim is
        one statement (an insert that takes over only an expired record), so of two workers claiming the
        same key at once exactly one gets it, on SQLite and on PostgreSQL alike.
        """
        while True:
            if self._store.fetchall(_CLAIM, (key, session_id, tool, fp, trace_id, now, now + ttl_s, now)):
                return None
            row = self._store.fetchone(_SELECT, (key,))
            if row is not None:
                return Record(*row)
            # the record was released between the two statements: claim again

    def extend(self, key: str, expires_at: float) -> None:
        """Keep the record until at least ``expires_at`` (a call still in flight must not expire)."""
        self._store.execute(
            "UPDATE idempotency SET expires_at = ? WHERE key = ? AND expires_at < ?", (expires_at, key, expires_at)
        )

    def complete(self, key: str, *, status: str, reason: str | None, content: str, resource: str | None = None) -> None:
        """Store the result to replay, and what the call acted on (if a server crash loses it, the call reads
        as outcome unknown: safe)."""
        self._store.execute(
            "UPDATE idempotency SET state = 'completed', status = ?, reason = ?, content = ?, resource = ? "
            "WHERE key = ?",
            (status, reason, content, resource, key),
            durable=False,
        )

    def supersede(self, resource: str, *, keep: str | None) -> list[str]:
        """Forget the completed records, in any session, of calls that acted on ``resource``, all but ``keep``:
        a later call changed that thing, so their stored results no longer describe the world.

        Returns:
            The trace ids of the calls whose records were forgotten.
        """
        rows = self._store.fetchall(
            "DELETE FROM idempotency WHERE resource = ? AND state = 'completed' AND key <> ? RETURNING trace_id",
            (resource, keep or ""),
        )
        return [str(r[0]) for r in rows]

    def mark_unknown(self, key: str, *, reason: str, content: str) -> None:
        """The call may have taken effect (timeout, crash of a child process): later calls conflict."""
        self._store.execute(
            "UPDATE idempotency SET state = 'unknown', status = 'error', reason = ?, content = ? WHERE key = ?",
            (reason, content, key),
            durable=False,
        )

    def release(self, key: str) -> None:
        """Forget the key: nothing happened (a failure before execution, a permanent refusal, a compensation)."""
        self._store.execute("DELETE FROM idempotency WHERE key = ?", (key,))

    def purge(self, now: float) -> int:
        """Delete expired records; returns how many."""
        return self._store.execute("DELETE FROM idempotency WHERE expires_at <= ?", (now,))
