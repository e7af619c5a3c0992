"""Clocks: wall time for records that outlive the process, monotonic time for durations.

The dispatcher takes a ``Clock`` so that tests can move time by hand instead of sleeping.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    """Where the dispatcher reads time."""

    def time(self) -> float:
        """Wall-clock seconds since the epoch (TTLs, freshness, trace start and end)."""
        ...

    def monotonic(self) -> float:
        """Monotonic seconds (latencies)."""
        ...


class SystemClock:
    """The real clocks: ``time.time`` and ``time.perf_counter``."""

    def time(self) -> float:
        """Wall-clock seconds since the epoch."""
        return time.time()

    def monotonic(self) -> float:
        """High-resolution monotonic seconds."""
        return time.perf_counter()


class ManualClock:
    """A clock that moves only when told to; both readings advance together.

    Args:
        start: the initial wall time.
    """

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start

    def time(self) -> float:
        """The current manual wall time."""
        return self._now

    def monotonic(self) -> float:
        """The current manual time, as a monotonic reading."""
        return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        self._now += seconds
