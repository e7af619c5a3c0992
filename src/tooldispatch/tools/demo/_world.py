"""The intra-city logistics world: drivers, orders and a message outbox, kept in SQLite.

Every side effect (an assignment, an unassignment, a message, a cancellation) is one row in the
``demo_audit`` table written in the same transaction as the change itself, so a test can count side
effects exactly, across threads and across processes sharing one database file.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooldispatch.errors import ConfigError, ToolError

ORDER_STATUSES: tuple[str, ...] = ("pending", "assigned", "cancelled", "delivered")
"""Every status an order can have."""

DEFAULT_ZONES: tuple[str, ...] = ("north", "south", "east")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS demo_drivers (
    id TEXT PRIMARY KEY,
    zone TEXT NOT NULL,
    available INTEGER NOT NULL,
    capacity INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS demo_orders (
    id TEXT PRIMARY KEY,
    zone TEXT NOT NULL,
    customer TEXT NOT NULL,
    status TEXT NOT NULL,
    driver_id TEXT
);
CREATE TABLE IF NOT EXISTS demo_outbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    recipient TEXT NOT NULL,
    subject TEXT NOT NULL,
    body TEXT NOT NULL,
    sent_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS demo_audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tool TEXT NOT NULL,
    target TEXT NOT NULL,
    detail TEXT NOT NULL,
    at REAL NOT NULL
);
"""


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One side effect, as recorded in the world's audit log.

    Attributes:
        seq: position in the log (1-based, increasing).
        tool: the tool that caused it (``assign_driver``, ``send_message`` ...).
        target: what it acted on (an order id, a recipient).
        detail: the arguments that identify the effect.
        at: when it happened, in seconds since the epoch (the world's clock).
    """

    seq: int
    tool: str
    target: str
    detail: dict[str, Any]
    at: float


def _not_found(kind: str, ident: str, hint: str) -> ToolError:
    return ToolError(f"unknown {kind} {ident!r}; {hint}", retryable=False, status=404)


def _conflict(message: str) -> ToolError:
    return ToolError(message, retryable=False, status=409)


class DemoWorld:
    """The state of the logistics demo and the tools that act on it.

    The tool methods (``list_drivers`` ... ``cancel_order``) are what an agent calls; they return
    JSON-serializable dicts and raise :class:`~tooldispatch.errors.ToolError` for business errors
    (unknown order, driver busy) with a message that says what to do next. The other methods inspect
    or arrange the state for tests and benchmarks.

    One connection is shared behind a lock, so the tools are safe to call from worker threads. Several
    processes may open the same file: writes take SQLite's write lock for the whole transaction.

    Args:
        path: a SQLite file, or ``":memory:"``.
        clock: the time source for timestamps (seconds since the epoch).
    """

    def __init__(self, path: str | Path = ":memory:", *, clock: Callable[[], float] = time.time) -> None:
        self.path = str(path)
        self._clock = clock
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
        self._conn.row_factory = sqlite3.Row
        if self.path != ":memory:":
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.executescript(_SCHEMA)

    @classmethod
    def seed(
        cls,
        path: str | Path = ":memory:",
        *,
        zones: Sequence[str] = DEFAULT_ZONES,
        drivers_per_zone: int = 3,
        orders_per_zone: int = 3,
        capacity: int = 3,
        clock: Callable[[], float] = time.time,
    ) -> DemoWorld:
        """Create a world with a fixed, predictable layout.

        Zone number ``z`` (1-based) gets drivers ``d-<zone>-1`` ... ``d-<zone>-N``, all available except
        the last one (off shift), and pending orders ``o-<z>01`` ... (``o-101`` is the first order in
        the first zone) whose customer is ``c-<z>01`` ... An existing file keeps its state: seeding
        only fills a world that has no drivers yet.

        Args:
            path: a SQLite file, or ``":memory:"``.
            zones: zone names, in order.
            drivers_per_zone: drivers in each zone (at least 1).
            orders_per_zone: orders in each zone (at most 99).
            capacity: how many orders one driver may hold at once.
            clock: the time source for timestamps.

        Returns:
            The seeded world.

        Raises:
            ConfigError: zones repeat, or a count is out of range.
        """
        if len(set(zones)) != len(zones) or not zones:
            raise ConfigError(f"zones must be distinct names, at least one: {list(zones)}")
        if drivers_per_zone < 1 or not 1 <= orders_per_zone <= 99 or capacity < 1:
            raise ConfigError("seed needs drivers_per_zone >= 1, 1 <= orders_per_zone <= 99 and capacity >= 1")
        world = cls(path, clock=clock)
        with world._write() as conn:
            if conn.execute("SELECT COUNT(*) FROM demo_drivers").fetchone()[0]:
                return world
            for z, zone in enumerate(zones, start=1):
                for i in range(1, drivers_per_zone + 1):
                    available = 1 if (i < drivers_per_zone or drivers_per_zone == 1) else 0
                    conn.execute(
                        "INSERT INTO demo_drivers VALUES (?, ?, ?, ?)", (f"d-{zone}-{i}", zone, available, capacity)
                    )
                for i in range(1, orders_per_zone + 1):
                    conn.execute(
                        "INSERT INTO demo_orders VALUES (?, ?, ?, 'pending', NULL)",
                        (f"o-{z}{i:02d}", zone, f"c-{z}{i:02d}"),
                    )
        return world

    # ----------------------------------------------------------------------------------------- plumbing

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def _audit(self, conn: sqlite3.Connection, tool: str, target: str, detail: dict[str, Any]) -> None:
        conn.execute(
            "INSERT INTO demo_audit (tool, target, detail, at) VALUES (?, ?, ?, ?)",
            (tool, target, json.dumps(detail, sort_keys=True), self._clock()),
        )

    def _driver_row(self, conn: sqlite3.Connection, driver_id: str) -> sqlite3.Row:
        row: sqlite3.Row | None = conn.execute("SELECT * FROM demo_drivers WHERE id = ?", (driver_id,)).fetchone()
        if row is None:
            raise _not_found("driver", driver_id, "call list_drivers(zone) to see the drivers of a zone")
        return row

    def _order_row(self, conn: sqlite3.Connection, order_id: str) -> sqlite3.Row:
        row: sqlite3.Row | None = conn.execute("SELECT * FROM demo_orders WHERE id = ?", (order_id,)).fetchone()
        if row is None:
            raise _not_found("order", order_id, "call list_orders() to see the existing orders")
        return row

    def _drivers_of(self, zone: str) -> list[dict[str, Any]]:
        with self._lock:
            if not self._conn.execute("SELECT 1 FROM demo_drivers WHERE zone = ? LIMIT 1", (zone,)).fetchone():
                zones = [r[0] for r in self._conn.execute("SELECT DISTINCT zone FROM demo_drivers ORDER BY zone")]
                raise _not_found("zone", zone, f"known zones: {', '.join(zones)}")
            drivers = self._conn.execute("SELECT * FROM demo_drivers WHERE zone = ? ORDER BY id", (zone,)).fetchall()
            load = dict(
                self._conn.execute(
                    "SELECT driver_id, group_concat(id) FROM demo_orders WHERE status = 'assigned' GROUP BY driver_id"
                ).fetchall()
            )
        out = []
        for d in drivers:
            assigned = sorted(load[d["id"]].split(",")) if d["id"] in load else []
            out.append(
                {
                    "id": d["id"],
                    "zone": d["zone"],
                    "available": bool(d["available"]) and len(assigned) < d["capacity"],
                    "on_shift": bool(d["available"]),
                    "assigned_orders": assigned,
                    "capacity": d["capacity"],
                }
            )
        return out

    @staticmethod
    def _order_dict(row: sqlite3.Row) -> dict[str, Any]:
        return {
            "id": row["id"],
            "zone": row["zone"],
            "customer": row["customer"],
            "status": row["status"],
            "driver_id": row["driver_id"],
        }

    # -------------------------------------------------------------------------------------------- tools

    def list_drivers(self, zone: str) -> dict[str, Any]:
        """List the drivers of a zone with their availability and assigned orders.

        Args:
            zone: the zone name, e.g. "north".

        Returns:
            The zone and its drivers.
        """
        return {"zone": zone, "drivers": self._drivers_of(zone)}

    def refresh_drivers(self, zone: str | None = None) -> dict[str, Any]:
        """Fetch the live availability of drivers (one zone, or every zone); required before assigning one.

        Args:
            zone: the zone name, e.g. "north"; omit it to refresh every zone.

        Returns:
            The zone (``None`` for all), its drivers and when they were observed.
        """
        if zone is not None:
            return {"zone": zone, "drivers": self._drivers_of(zone), "observed_at": self._clock()}
        with self._lock:
            zones = [r[0] for r in self._conn.execute("SELECT DISTINCT zone FROM demo_drivers ORDER BY zone")]
        drivers = [d for z in zones for d in self._drivers_of(z)]
        return {"zone": None, "drivers": drivers, "observed_at": self._clock()}

    def get_order(self, order_id: str) -> dict[str, Any]:
        """Look up one order.

        Args:
            order_id: the order id, e.g. "o-101".

        Returns:
            The order: id, zone, customer, status and assigned driver.
        """
        with self._lock:
            return self._order_dict(self._order_row(self._conn, order_id))

    def list_orders(self, status: str | None = None) -> dict[str, Any]:
        """List orders, optionally only those with one status.

        Args:
            status: one of "pending", "assigned", "cancelled", "delivered"; all orders when omitted.

        Returns:
            The matching orders, sorted by id.
        """
        if status is None:
            rows = self._read("SELECT * FROM demo_orders ORDER BY id")
        elif status in ORDER_STATUSES:
            rows = self._read("SELECT * FROM demo_orders WHERE status = ? ORDER BY id", (status,))
        else:
            raise ToolError(
                f"unknown order status {status!r}; use one of {', '.join(ORDER_STATUSES)} or omit it",
                retryable=False,
                status=422,
            )
        return {"orders": [self._order_dict(r) for r in rows]}

    def assign_driver(self, driver_id: str, order_id: str) -> dict[str, Any]:
        """Assign a driver to a pending order in the same zone.

        Args:
            driver_id: the driver id, e.g. "d-north-1".
            order_id: the order id, e.g. "o-101".

        Returns:
            The order id, the driver id and the order's new status.
        """
        with self._write() as conn:
            driver = self._driver_row(conn, driver_id)
            order = self._order_row(conn, order_id)
            if order["status"] != "pending":
                holder = f" to {order['driver_id']}" if order["driver_id"] else ""
                raise _conflict(f"order {order_id} is {order['status']}{holder}, not pending; it cannot be assigned")
            if driver["zone"] != order["zone"]:
                raise _conflict(
                    f"driver {driver_id} works in zone {driver['zone']} but order {order_id} is in zone "
                    f"{order['zone']}; pick a driver from list_drivers({order['zone']!r})"
                )
            if not driver["available"]:
                raise _conflict(f"driver {driver_id} is off shift; call refresh_drivers and pick an available driver")
            load = conn.execute(
                "SELECT COUNT(*) FROM demo_orders WHERE driver_id = ? AND status = 'assigned'", (driver_id,)
            ).fetchone()[0]
            if load >= driver["capacity"]:
                raise _conflict(
                    f"driver {driver_id} is busy with {load} orders (capacity {driver['capacity']}); "
                    "pick another available driver"
                )
            conn.execute(
                "UPDATE demo_orders SET status = 'assigned', driver_id = ? WHERE id = ?", (driver_id, order_id)
            )
            self._audit(conn, "assign_driver", order_id, {"driver_id": driver_id, "order_id": order_id})
        return {"order_id": order_id, "driver_id": driver_id, "status": "assigned"}

    def unassign_driver(self, driver_id: str, order_id: str) -> dict[str, Any]:
        """Take a driver off an order, which becomes pending again (the inverse of assign_driver).

        Args:
            driver_id: the driver currently assigned, e.g. "d-north-1".
            order_id: the order id, e.g. "o-101".

        Returns:
            The order id, the driver id and the order's new status.
        """
        with self._write() as conn:
            self._driver_row(conn, driver_id)
            order = self._order_row(conn, order_id)
            if order["status"] != "assigned" or order["driver_id"] != driver_id:
                raise _conflict(
                    f"order {order_id} is not assigned to {driver_id} (status {order['status']}, "
                    f"driver {order['driver_id']}); call get_order to see who holds it"
                )
            conn.execute("UPDATE demo_orders SET status = 'pending', driver_id = NULL WHERE id = ?", (order_id,))
            self._audit(conn, "unassign_driver", order_id, {"driver_id": driver_id, "order_id": order_id})
        return {"order_id": order_id, "driver_id": driver_id, "status": "pending"}

    def send_message(self, to: str, subject: str, body: str) -> dict[str, Any]:
        """Send a message to a customer or a driver.

        Args:
            to: the recipient id, e.g. the order's customer "c-101".
            subject: a short subject line.
            body: the message text.

        Returns:
            The message id, recipient and subject.
        """
        if not to.strip():
            raise ToolError("the recipient 'to' is empty; use the customer id from get_order", retryable=False)
        with self._write() as conn:
            cur = conn.execute(
                "INSERT INTO demo_outbox (recipient, subject, body, sent_at) VALUES (?, ?, ?, ?)",
                (to, subject, body, self._clock()),
            )
            self._audit(conn, "send_message", to, {"to": to, "subject": subject})
        return {"message_id": cur.lastrowid, "to": to, "subject": subject}

    def cancel_order(self, order_id: str, reason: str) -> dict[str, Any]:
        """Cancel an order and release its driver. Needs a human's approval.

        Args:
            order_id: the order id, e.g. "o-101".
            reason: why the order is cancelled, as told to the customer.

        Returns:
            The order id, its new status and the reason.
        """
        with self._write() as conn:
            order = self._order_row(conn, order_id)
            if order["status"] in ("cancelled", "delivered"):
                raise _conflict(f"order {order_id} is already {order['status']}; nothing to cancel")
            conn.execute("UPDATE demo_orders SET status = 'cancelled', driver_id = NULL WHERE id = ?", (order_id,))
            self._audit(conn, "cancel_order", order_id, {"order_id": order_id, "reason": reason})
        return {"order_id": order_id, "status": "cancelled", "reason": reason}

    # ------------------------------------------------------------------------------- inspection, setup

    def record_effect(self, tool: str, target: str, detail: dict[str, Any] | None = None) -> int:
        """Record a side effect performed by a tool defined outside this module (tests, chaos tools).

        Args:
            tool: the tool name.
            target: what it acted on.
            detail: identifying arguments.

        Returns:
            The new entry's sequence number.
        """
        with self._write() as conn:
            self._audit(conn, tool, target, detail or {})
            return int(conn.execute("SELECT last_insert_rowid()").fetchone()[0])

    def audit(self, tool: str | None = None) -> list[AuditEntry]:
        """Return the side effects recorded so far, oldest first, optionally for one tool."""
        sql = "SELECT * FROM demo_audit" + (" WHERE tool = ?" if tool else "") + " ORDER BY seq"
        rows = self._read(sql, (tool,) if tool else ())
        return [AuditEntry(r["seq"], r["tool"], r["target"], json.loads(r["detail"]), r["at"]) for r in rows]

    def count_effects(self, tool: str | None = None, target: str | None = None) -> int:
        """Count recorded side effects, optionally for one tool and one target."""
        return sum(1 for e in self.audit(tool) if target is None or e.target == target)

    def outbox(self) -> list[dict[str, Any]]:
        """Return every sent message, oldest first."""
        rows = self._read("SELECT * FROM demo_outbox ORDER BY seq")
        return [{"id": r["seq"], "to": r["recipient"], "subject": r["subject"], "body": r["body"]} for r in rows]

    def order(self, order_id: str) -> dict[str, Any]:
        """Return one order's current state (raises ToolError when unknown)."""
        return self.get_order(order_id)

    def orders(self) -> dict[str, dict[str, Any]]:
        """Return every order by id."""
        return {o["id"]: o for o in self.list_orders()["orders"]}

    def set_on_shift(self, driver_id: str, on_shift: bool) -> None:
        """Put a driver on or off shift (the world changing under the agent; not a tool side effect)."""
        with self._write() as conn:
            self._driver_row(conn, driver_id)
            conn.execute("UPDATE demo_drivers SET available = ? WHERE id = ?", (int(on_shift), driver_id))

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._conn.close()
