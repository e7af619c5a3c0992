"""Shared fixtures for the dispatch unit tests: a logistics-like registry with counters."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tooldispatch.dispatch import Dispatcher, ManualClock, Registry

PAIR = {
    "type": "object",
    "properties": {"driver_id": {"type": "string"}, "order_id": {"type": "string"}},
    "required": ["driver_id", "order_id"],
    "additionalProperties": False,
}


class World:
    """Tools with side-effect counters, so tests can count exactly what ran."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.log: list[tuple[str, dict[str, Any]]] = []

    def assign(self, driver_id: str, order_id: str) -> dict[str, Any]:
        self.calls["assign_driver"] += 1
        self.log.append(("assign_driver", {"driver_id": driver_id, "order_id": order_id}))
        return {"assignment": f"{driver_id}:{order_id}", "driver_id": driver_id}

    def unassign(self, driver_id: str, order_id: str) -> dict[str, Any]:
        self.calls["unassign_driver"] += 1
        self.log.append(("unassign_driver", {"driver_id": driver_id, "order_id": order_id}))
        return {"unassigned": f"{driver_id}:{order_id}"}

    def refresh(self) -> dict[str, Any]:
        self.calls["refresh_drivers"] += 1
        return {"drivers": ["d1", "d2"]}

    def send(self, to: str, subject: str, body: str) -> dict[str, Any]:
        self.calls["send_message"] += 1
        return {"sent": self.calls["send_message"], "to": to}

    def cancel(self, order_id: str) -> dict[str, Any]:
        self.calls["cancel_order"] += 1
        self.log.append(("cancel_order", {"order_id": order_id}))
        return {"cancelled": order_id}


def build_registry(world: World) -> Registry:
    """The issue's example registry, backed by ``world``."""
    reg = Registry()
    reg.register("unassign_driver", world.unassign, schema=PAIR, read_only=False)
    reg.register(
        "assign_driver",
        world.assign,
        schema=PAIR,
        read_only=False,
        destructive=True,
        quota={"limit": 3, "per": "driver_id"},
        requires_fresh_state={"resource": "drivers", "max_age_s": 30},
        compensate="unassign_driver",
    )
    reg.register(
        "refresh_drivers",
        world.refresh,
        schema={"type": "object", "properties": {}},
        read_only=True,
        refreshes="drivers",
    )
    reg.register(
        "send_message",
        world.send,
        schema={
            "type": "object",
            "properties": {"to": {"type": "string"}, "subject": {"type": "string"}, "body": {"type": "string"}},
            "required": ["to", "subject", "body"],
        },
        read_only=False,
        idempotency_fields=["to", "subject"],
        idempotency_ttl_s=3600,
        timeout_s=10,
    )
    reg.register(
        "cancel_order",
        world.cancel,
        schema={"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
        read_only=False,
        destructive=True,
        requires_approval=True,
    )
    return reg


async def no_sleep(_: float) -> None:
    """Retry waits cost nothing in unit tests."""


@pytest.fixture
def world() -> World:
    return World()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def dispatcher(world: World, clock: ManualClock) -> Iterator[Dispatcher]:
    d = Dispatcher(build_registry(world), store=":memory:", clock=clock, sleep=no_sleep, rand=lambda: 0.5)
    yield d
    d.close()
