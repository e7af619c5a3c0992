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
