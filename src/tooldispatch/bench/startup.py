"""Start-up time of the command line, side by side with ``llm --help`` and the interpreter's own floor.

Each round runs every command once, in an order that alternates between rounds (ABBA), so a busy
machine slows them alike; the report keeps each command's median and fastest run and the ratios of the
medians. A first, untimed round lets Python write its bytecode caches, as they are on a user's machine
(``PYTHONDONTWRITEBYTECODE`` is dropped from the commands' environment for that reason). Nothing here is
asserted in tests: timings on a shared machine are noise for a test.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

TARGET_S = 0.3
"""The start-up target of ``tooldispatch --help``."""


@dataclass
class Timing:
    """One command's wall times, in seconds."""

    label: str
    argv: list[str]
    runs: list[float] = field(default_factory=list)
    note: str = ""

    @property
    def median(self) -> float:
        return statistics.median(self.runs)

    @property
    def fastest(self) -> float:
        return min(self.runs)


def _beside_python(name: str) -> str | None:
    """A console script installed with this interpreter, else one on PATH."""
    here = Path(sys.executable).parent / name
    return str(here) if here.is_file() else shutil.which(name)


def commands() -> list[Timing]:
    """The commands compared: the floor, tooldispatch --help and (when installed) llm --help."""
    rows = [
        Timing("python -c pass (the floor)", [sys.executable, "-c", "pass"]),
        Timing("python -c 'import typer'", [sys.executable, "-c", "import typer"]),
    ]
    ours = _beside_python("tooldispatch")
    rows.append(
        Timing("tooldispatch --help", [ours, "--help"] if ours else [sys.executable, "-m", "tooldispatch", "--help"])
    )
    theirs = _beside_python("llm")
    if theirs is not None:
        rows.append(Timing("llm --help", [theirs, "--help"]))
    return rows


def run(rounds: int = 10) -> list[Timing]:
    """Time every command ``rounds`` times, interleaved; raises ``RuntimeError`` naming a command that fails."""
    rows = commands()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["NO_COLOR"] = "1"
    for i in range(rounds + 1):
        for row in rows if i % 2 == 0 else reversed(rows):
            start = time.perf_counter()
            done = subprocess.run(row.argv, env=env, capture_output=True, check=False)
            if i > 0:
                row.runs.append(time.perf_counter() - start)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(row.argv)} exited with {done.returncode}: {done.stderr[-300:]!r}")
    return rows
