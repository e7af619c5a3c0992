"""Module-level tools for process isolation tests (a spawned child imports them by name)."""

from __future__ import annotations

import os
import time
from pathlib import Path


def sleep_forever(pid_file: str) -> dict[str, int]:
    """Write the child's pid, then block far past any test timeout."""
    Path(pid_file).write_text(str(os.getpid()))
    time.sleep(600)
    return {"slept": 600}


def add(a: int, b: int) -> dict[str, int]:
    """Return the sum."""
    return {"sum": a + b}


def crash(code: int) -> dict[str, int]:
    """Exit the child process abruptly without a result."""
    os._exit(code)


def not_json() -> object:
    """Return a value JSON cannot encode."""
    return {1, 2}


class Unprintable(Exception):
    """An exception whose message itself fails."""

    def __str__(self) -> str:
        raise ZeroDivisionError


def lone_surrogate() -> dict[str, str]:
    """Return a string holding an unpaired UTF-16 surrogate (valid in Python, not encodable)."""
    return {"text": "a\ud800b"}


def too_deep() -> list[object]:
    """Return a list nested 5,000 levels."""
    value: list[object] = [1]
    for _ in range(5000):
        value = [value]
    return value


def unprintable() -> dict[str, int]:
    """Raise an exception that cannot be turned into text."""
    raise Unprintable
