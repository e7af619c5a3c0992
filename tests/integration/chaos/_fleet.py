"""A fleet worker for the PostgreSQL chaos test: one process, one Dispatcher, the shared store.

Every worker dispatches the same calls in the same session (as a load balancer retrying one agent's
request on several workers would). Each side effect is one row in ``effects``, committed by the tool on
its own connection, so the test counts side effects exactly, whichever worker ran them and whether it
lived to record the result. A worker writes one byte to ``signal_fd`` each time a tool starts (the test
kills it right after), and one line per approval it was granted to ``grants``.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any

from tooldispatch.dispatch import Dispatcher, Registry
from tooldispatch.errors import ConfigError

SESSION = "fleet"
QUOTA = 3
DRIVERS = 7
EFFECTS_DDL = (
    "CREATE TABLE IF NOT EXISTS effects (id BIGSERIAL PRIMARY KEY, tool TEXT NOT NULL, key TEXT NOT NULL, "
    "driver TEXT, worker TEXT NOT NULL)"
)


class _Tools:
    def __init__(self, url: str, worker: str, signal_fd: int | None, rng: random.Random) -> None:
        self.url, self.worker, self.signal_fd, self.rng = url, worker, signal_fd, rng
        self._conn: Any = None

    def _effect(self, tool: str, key: str, driver: str | None = None) -> None:
        import psycopg

        if self.signal_fd is not None:
            os.write(self.signal_fd, b"i")
        time.sleep(self.rng.uniform(0, 0.004))
        if self._conn is None:
            self._conn = psycopg.connect(self.url, autocommit=True)
        self._conn.execute(
            "INSERT INTO effects (tool, key, driver, worker) VALUES (%s, %s, %s, %s)", (tool, key, driver, self.worker)
        )
        time.sleep(self.rng.uniform(0, 0.006))

    def charge(self, order_id: str) -> dict[str, Any]:
        self._effect("charge", order_id)
        return {"charged": order_id}

    def assign(self, driver_id: str, order_id: str) -> dict[str, Any]:
        self._effect("assign", order_id, driver_id)
        return {"assigned": order_id, "driver_id": driver_id}

    def cancel(self, order_id: str) -> dict[str, Any]:
        self._effect("cancel", order_id)
        return {"cancelled": order_id}


def registry(tools: _Tools) -> Registry:
    order = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
    pair = {
        "type": "object",
        "properties": {"driver_id": {"type": "string"}, "order_id": {"type": "string"}},
        "required": ["driver_id", "order_id"],
    }
    reg = Registry()
    reg.register("charge", tools.charge, schema=order, read_only=False, destructive=False, timeout_s=5)
    reg.register(
        "assign",
        tools.assign,
        schema=pair,
        read_only=False,
        destructive=False,
        quota={"limit": QUOTA, "per": "driver_id"},
        timeout_s=5,
    )
    reg.register(
        "cancel", tools.cancel, schema=order, read_only=False, destructive=True, requires_approval=True, timeout_s=5
    )
    return reg


def calls_at(n: int) -> list[tuple[str, dict[str, str]]]:
    """The calls every worker makes at step ``n``."""
    calls: list[tuple[str, dict[str, str]]] = [("charge", {"order_id": f"o-{n}"})]
    if n % 3 == 0:
        calls.append(("assign", {"driver_id": f"d-{n % DRIVERS}", "order_id": f"o-{n}"}))
    if n % 5 == 0:
        calls.append(("cancel", {"order_id": f"o-{n}"}))
    return calls


def work(url: str, worker: str, start: int, stop: int, stop_file: Path, grants: Path, signal_fd: int | None) -> None:
    """Dispatch steps ``start``..``stop`` (wrapping) until ``stop_file`` exists, approving what waits.

    On a clean stop the worker writes ``done N`` to ``grants``: every step before N was dispatched in full.
    """
    rng = random.Random(f"{worker}-{os.getpid()}")
    tools = _Tools(url, worker, signal_fd, rng)
    with Dispatcher(registry(tools), store=url) as dispatcher, grants.open("a", buffering=1) as log:
        n = start
        while not stop_file.exists():
            for name, args in calls_at(n):
                dispatcher.dispatch(name, args, session_id=SESSION)
            for pending in dispatcher.approvals()[:2]:
                try:
                    dispatcher.approve(pending.id)
                except ConfigError:
                    continue  # another worker took it first
                log.write(f"{pending.id}\n")
            n = n + 1 if n + 1 < stop else 0
            if signal_fd is None:
                time.sleep(0.01)  # the steady workers leave CPU to the restarts (two cores run all five)
        log.write(f"done {n}\n")
