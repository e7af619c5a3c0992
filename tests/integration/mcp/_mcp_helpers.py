"""Helpers shared by the MCP tests."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

HERE = Path(__file__).parent


def need(module: str) -> None:
    """Skip when a server package of the dev extras is missing."""
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install -e '.[dev]' installs it)")


def write_config(path: Path, servers: dict[str, dict[str, object]]) -> Path:
    """Write an mcpServers file and return its path."""
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def alive(pid: int) -> bool:
    """Whether a process exists, zombies included (a reaped child has no /proc entry)."""
    return Path(f"/proc/{pid}").exists()
