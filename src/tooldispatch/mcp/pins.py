"""Pinning MCP tool definitions, so that a server cannot change a tool behind the user's back.

The first time a server's tool is seen, a hash of what the model and the dispatcher are told about it
(name, description, input and output schemas, annotations) is stored, approved: trust on first use. A
later listing whose definition hashes differently (a "rug pull") stores the new version as ``pending``:
the tool is blocked until a person approves that version (``tooldispatch approvals approve pin_...``) or
the server goes back to an approved one. Rows are plain SQL on the store's connection API (table
``mcp_pins``, migration ``mcp_0001_pins``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from tooldispatch.store import StateStore

PinState = Literal["approved", "pending", "denied"]


def definition_of(tool: Any) -> dict[str, Any]:
    """The parts of an ``mcp_types.Tool`` that are pinned, as plain JSON."""
    annotations = tool.annotations.model_dump(mode="json", exclude_none=True) if tool.annotations else None
    return {
        "name": tool.name,
        "description": tool.description or "",
        "input_schema": tool.input_schema,
        "output_schema": tool.output_schema,
        "annotations": annotations,
    }


def definition_hash(definition: Mapping[str, Any]) -> str:
    """sha256 of a definition in canonical JSON."""
    blob = json.dumps(definition, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class Pin:
    """One version of one server's tool.

    Attributes:
        id: ``pin_`` and 16 hex digits (of the server and the hash): what ``tooldispatch approvals`` takes.
        server: the server's name in the config.
        tool: the tool's name on the server.
        sha256: the definition hash.
        definition: the definition as listed.
        state: ``approved``, ``pending`` (a change waiting for a person) or ``denied``.
        first_seen: wall time it was first listed.
        decided_at: wall time a person decided (None for first-seen versions and pending ones).
    """

    id: str
    server: str
    tool: str
    sha256: str
    definition: dict[str, Any]
    state: PinState
    first_seen: float
    decided_at: float | None


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a listing's tool is, against its pins.

    Attributes:
        status: ``new`` (first seen, now pinned), ``pinned`` (an approved version), ``changed`` (blocked).
        pin: the listed version's pin.
        approved: the latest approved version, when the listed one is not approved.
    """

    status: Literal["new", "pinned", "changed"]
    pin: Pin
    approved: Pin | None = None

    def message(self) -> str:
        """One line for a blocked tool: what changed and how a person approves it."""
        before = self.approved.sha256[:12] if self.approved else "?"
        return (
            f"MCP server {self.pin.server!r} changed tool {self.pin.tool!r} since it was approved (definition "
            f"sha256 {before} → {self.pin.sha256[:12]}); it stays blocked until a person reviews the change: "
            f"tooldispatch approvals list, then tooldispatch approvals approve {self.pin.id}"
        )


_COLUMNS = "id, server, tool, sha256, definition, state, first_seen, decided_at"


class Pins:
    """Pinned definitions in the store.

    Args:
        store: the dispatcher's store.
    """

    def __init__(self, store: StateStore) -> None:
        self.store = store

    def check(self, server: str, definition: Mapping[str, Any], now: float) -> Verdict:
        """Compare a listed definition with the pins, recording it (approved when first seen, else pending)."""
        tool = str(definition["name"])
        digest = definition_hash(definition)
        pin_id = "pin_" + hashlib.sha256(f"{server}:{digest}".encode()).hexdigest()[:16]
        with self.store.transaction():
            rows = self._rows("WHERE server = ? AND tool = ? ORDER BY first_seen, id", (server, tool))
            same = next((p for p in rows if p.sha256 == digest), None)
            if same is not None and same.state == "approved":
                return Verdict("pinned", same)
            approved = [p for p in rows if p.state == "approved"]
            if not rows:
                self._insert(pin_id, server, tool, digest, definition, "approved", now)
                return Verdict("new", self._one(pin_id))
            if same is None:
                self._insert(pin_id, server, tool, digest, definition, "pending", now)
                same = self._one(pin_id)
            return Verdict("changed", same, approved[-1] if approved else None)

    def approved(self, server: str) -> list[Pin]:
        """The latest approved version of each of a server's tools, in the order first seen."""
        latest: dict[str, Pin] = {}
        for pin in self._rows("WHERE server = ? AND state = 'approved' ORDER BY first_seen, id", (server,)):
            latest[pin.tool] = pin
        return list(latest.values())

    def pending(self) -> list[Pin]:
        """Changed definitions waiting for a person, oldest first."""
        return self._rows("WHERE state = 'pending' ORDER BY first_seen, id", ())

    def get(self, pin_id: str) -> Pin | None:
        """One pin by id."""
        rows = self._rows("WHERE id = ?", (pin_id,))
        return rows[0] if rows else None

    def decide(self, pin_id: str, state: Literal["approved", "denied"], now: float) -> Pin | None:
        """Approve or deny a pending version (take-once); None when unknown or already decided."""
        changed = self.store.execute(
            "UPDATE mcp_pins SET state = ?, decided_at = ? WHERE id = ? AND state = 'pending'", (state, now, pin_id)
        )
        return self.get(pin_id) if changed == 1 else None

    def _insert(
        self, pin_id: str, server: str, tool: str, digest: str, definition: Mapping[str, Any], state: str, now: float
    ) -> None:
        self.store.execute(
            f"INSERT INTO mcp_pins ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)",
            (pin_id, server, tool, digest, json.dumps(definition, sort_keys=True, ensure_ascii=False), state, now),
        )

    def _one(self, pin_id: str) -> Pin:
        pin = self.get(pin_id)
        assert pin is not None
        return pin

    def _rows(self, where: str, params: tuple[Any, ...]) -> list[Pin]:
        rows = self.store.fetchall(f"SELECT {_COLUMNS} FROM mcp_pins {where}", params)
        return [Pin(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], float(r[6]), r[7]) for r in rows]
