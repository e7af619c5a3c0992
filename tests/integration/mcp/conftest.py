"""Fixtures for the MCP tests: the test's own SDK server over Streamable HTTP."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from _mcp_helpers import HERE, need


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
