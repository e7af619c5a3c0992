"""Fixtures for the MCP tests: real servers from PyPI over stdio, and the test's own servers."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
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


@pytest.fixture
def http_server() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """The misbehaving SDK server over Streamable HTTP on 127.0.0.1, started for one test and stopped after it."""
    need("mcp")
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "_http_server.py"), "--rug-pull"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp", proc
    finally:
        proc.kill()
        proc.wait(10)
