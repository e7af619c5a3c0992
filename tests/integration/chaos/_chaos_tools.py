"""Tools that misbehave on purpose; every side effect is one audit row in a DemoWorld SQLite file."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooldispatch.dispatch import Dispatcher, Registry
from tooldispatch.errors import ToolError
from tooldispatch.tools.demo import DemoWorld


async def no_sleep(seconds: float) -> None:
    """Retry backoff that does not wait (the delays are decided, not slept)."""


class Chaos:
    """Thread-run chaos tools over one world; ``calls`` counts invocations per tool."""

    def __init__(self, world: DemoWorld, *, failures: int = 2) -> None:
        self.world = world
        self.failures = failures
        self.calls: Counter[str] = Counter()
        self.release = threading.Event()
        self._lock = threading.Lock()

    def _count(self, name: str) -> int:
        with self._lock:
            self.calls[name] += 1
            return self.calls[name]

    def hang_after_effect(self, key: str) -> dict[str, Any]:
        """Record a side effect, then hang until released.

        Args:
            key: what the effect is about.
        """
        self._count("hang_after_effect")
        self.world.record_effect("hang_after_effect", key)
        self.release.wait(10)
        return {"done": key}

    def hang_read(self, key: str) -> dict[str, Any]:
        """Hang without side effects until released.

        Args:
            key: what to look up.
        """
        self._count("hang_read")
        self.release.wait(10)
        return {"key": key}

    async def hang_async(self, key: str) -> dict[str, Any]:
        """An async tool that never finishes in time.

        Args:
            key: what to look up.
        """
        import asyncio

        self._count("hang_async")
        await asyncio.sleep(10)
        return {"key": key}

    def crash(self, key: str) -> dict[str, Any]:
        """Raise an unexpected exception before doing anything.

        Args:
            key: what the effect would be about.
        """
        self._count("crash")
        raise RuntimeError(f"segfault-like crash while handling {key}")

    def flaky_read(self, key: str) -> dict[str, Any]:
        """Fail with a transient error ``failures`` times, then answer.

        Args:
            key: what to look up.
        """
        if self._count("flaky_read") <= self.failures:
            raise ToolError("service busy", retryable=True, status=503)
        return {"key": key, "value": 42}

    def refused_then_write(self, key: str) -> dict[str, Any]:
        """Have the connection refused ``failures`` times (nothing ran), then write.

        Args:
            key: what the effect is about.
        """
        if self._count("refused_then_write") <= self.failures:
            raise ConnectionRefusedError("connection refused by the payment service")
        self.world.record_effect("refused_then_write", key)
        return {"written": key}

    def flaky_write(self, key: str) -> dict[str, Any]:
        """Fail with a transient error during execution, then write on later calls.

        Args:
            key: what the effect is about.
        """
        if self._count("flaky_write") <= self.failures:
            raise ToolError("gateway timeout while writing", retryable=True, status=504)
        self.world.record_effect("flaky_write", key)
        return {"written": key}

    def effect_then_raise(self, key: str) -> dict[str, Any]:
        """Perform the side effect, then lose the response.

        Args:
            key: what the effect is about.
        """
        self._count("effect_then_raise")
        self.world.record_effect("effect_then_raise", key)
        raise RuntimeError("connection reset while reading the response")

    def huge(self, key: str) -> dict[str, Any]:
        """Return about 5 MB.

        Args:
            key: what to look up.
        """
        self._count("huge")
        return {"key": key, "blob": "x" * 5_000_000}

    def not_json(self, key: str) -> Any:
        """Perform a side effect and return something that is not JSON.

        Args:
            key: what the effect is about.
        """
        self._count("not_json")
        self.world.record_effect("not_json", key)
        return {"key": key, "at": object()}

    def nan_read(self, key: str) -> dict[str, Any]:
        """Return NaN, which JSON cannot carry.

        Args:
            key: what to look up.
        """
        self._count("nan_read")
        return {"key": key, "value": float("nan")}


@dataclass
class Rig:
    """A world, its chaos tools and a dispatcher over them."""

    world: DemoWorld
    chaos: Chaos
    dispatcher: Dispatcher
    world_path: Path


def process_hang(world: str, key: str) -> dict[str, Any]:
    """Record a side effect in the world file, then sleep far past any timeout.

    Args:
        world: the world's SQLite file.
        key: what the effect is about.
    """
    DemoWorld(world).record_effect("process_hang", key)
    time.sleep(60)
    return {"done": key}


def process_crash(world: str, key: str) -> dict[str, Any]:
    """Record a side effect in the world file, then kill the process without a word.

    Args:
        world: the world's SQLite file.
        key: what the effect is about.
    """
    DemoWorld(world).record_effect("process_crash", key)
    os._exit(3)


def charge_registry(world: DemoWorld, *, marker: Path | None = None, hold: str = "none") -> Registry:
    """A registry with one side-effecting ``charge`` tool.

    Args:
        world: where the charge is recorded.
        marker: a file written when the tool is invoked.
        hold: ``none`` (return at once), ``after_effect`` (charge, then sleep) or ``before_effect``
            (sleep, then charge).
    """

    def charge(order_id: str) -> dict[str, Any]:
        """Charge the customer of an order.

        Args:
            order_id: the order to charge.
        """
        if hold == "after_effect":
            world.record_effect("charge", order_id)
        if marker is not None:
            marker.write_text("invoked", encoding="utf-8")
        if hold != "none":
            time.sleep(120)
        if hold in ("none", "before_effect"):
            world.record_effect("charge", order_id)
        return {"charged": order_id}

    reg = Registry()
    reg.register("charge", charge, read_only=False, destructive=False, timeout_s=300, source="chaos", version="1")
    return reg
