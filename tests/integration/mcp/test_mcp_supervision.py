"""Supervision of stdio servers: lazy start, stderr in the named log, restart after a crash, stop at exit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from json import loads as json_loads
from pathlib import Path

import pytest
from _mcp_helpers import HERE, alive

from tooldispatch.dispatch import Dispatcher
from tooldispatch.errors import ConfigError
from tooldispatch.mcp.config import parse_config
from tooldispatch.mcp.connection import backoff_s
from tooldispatch.mcp.source import McpServers
from tooldispatch.store import Store

pytestmark = pytest.mark.integration


def _config(journal: Path) -> list:  # type: ignore[type-arg]
    command = {"command": sys.executable, "args": [str(HERE / "_chaos_server.py"), str(journal)]}
    return parse_config({"mcpServers": {"chaos": {**command, "trust": "annotations"}}})


def test_servers_start_lazily_log_stderr_and_restart_after_a_crash(tmp_path: Path) -> None:
    """With pins stored, no server starts until a call; stderr lands in the named log; a killed server restarts."""
    pytest.importorskip("mcp")
    store = Store(tmp_path / "state.db")
    with McpServers(_config(tmp_path / "j.txt"), store=store, log_dir=tmp_path / "logs") as first:
        assert first.servers["chaos"].connection.starts == 1
    with McpServers(_config(tmp_path / "j.txt"), store=store, log_dir=tmp_path / "logs") as servers:
        connection = servers.servers["chaos"].connection
        assert (connection.starts, connection.pid) == (0, None)
        dispatcher = Dispatcher(servers.servers["chaos"].registry, store=store)
        assert dispatcher.dispatch("lookup", {"id": "1"}).status == "ok"
        first_pid = connection.pid
        assert first_pid is not None
        os.kill(first_pid, signal.SIGKILL)
        assert dispatcher.dispatch("lookup", {"id": "2"}).status == "ok"
        assert connection.starts == 2
        assert connection.pid not in (None, first_pid)
        pids = list(connection.pids)
        dispatcher.close()
    log = (tmp_path / "logs" / "chaos.log").read_text()
    assert f"chaos server {first_pid} ready" in log
    assert log.count("--- tooldispatch ") >= 4
    assert [p for p in pids if alive(p)] == []


def test_restart_backoff_doubles_up_to_its_ceiling() -> None:
    """No delay before the first start; then base, doubling per consecutive failure, capped."""
    assert [backoff_s(n, 0.05, 0.3) for n in range(6)] == [0.0, 0.05, 0.1, 0.2, 0.3, 0.3]


def test_a_server_that_cannot_start_is_one_line_naming_its_log(tmp_path: Path) -> None:
    """A command that exits at once fails loading with one line that points at the server's log."""
    pytest.importorskip("mcp")
    configs = parse_config(
        {"mcpServers": {"dead": {"command": sys.executable, "args": ["-c", "import sys; sys.exit('no config')"]}}}
    )
    with pytest.raises(ConfigError) as err:
        McpServers(configs, store=Store(":memory:"), log_dir=tmp_path)
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith("MCP server 'dead' could not be started (")
    assert text.endswith(f"see its log {tmp_path / 'dead.log'}")
    assert "no config" in (tmp_path / "dead.log").read_text()


def test_servers_are_stopped_and_reaped_when_the_process_exits(tmp_path: Path) -> None:
    """A program that never closes its McpServers leaves no server process behind (stopped at exit)."""
    pytest.importorskip("mcp")
    src = str(Path(__file__).resolve().parents[3] / "src")
    out = subprocess.run(
        [
            sys.executable,
            str(HERE / "_exit_without_close.py"),
            str(tmp_path / "j"),
            str(tmp_path / "s.db"),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": src},
    )
    assert out.returncode == 0, out.stderr
    pid = int(out.stdout.strip())
    assert not alive(pid)


def test_a_slow_start_fails_the_call_as_not_run_and_goes_on_in_the_background(tmp_path: Path) -> None:
    """A server slower to start than half a tool's budget: the call ends 'nothing ran' (no unknown outcome), the
    start goes on, and a later call finds the server ready."""
    pytest.importorskip("mcp")
    store = Store(tmp_path / "state.db")
    with McpServers(_config(tmp_path / "j.txt"), store=store, log_dir=tmp_path / "logs"):
        pass
    command = {"command": sys.executable, "args": [str(HERE / "_chaos_server.py"), str(tmp_path / "j.txt")]}
    slow = {**command, "env": {"CHAOS_START_DELAY_S": "3"}, "trust": "annotations", "timeout_s": 1}
    with McpServers(parse_config({"mcpServers": {"chaos": slow}}), store=store, log_dir=tmp_path / "logs") as servers:
        dispatcher = Dispatcher(servers.servers["chaos"].registry, store=store)
        early = dispatcher.dispatch("record", {"id": "r1"})
        envelope = json_loads(early.content)
        assert (early.status, envelope["error"], envelope["recoverable"], early.trace.attempts) == (
            "error",
            "tool_error",
            True,
            2,
        )
        assert "is still starting" in envelope["message"]
        connection = servers.servers["chaos"].connection
        deadline = time.monotonic() + 30
        while not connection.ready and time.monotonic() < deadline:
            time.sleep(0.05)
        later = dispatcher.dispatch("record", {"id": "r1"})
        assert (later.status, later.value) == ("ok", "record r1 done")
        assert connection.starts == 1
        dispatcher.close()


def test_config_declarations_give_mcp_tools_quotas_and_approvals(tmp_path: Path) -> None:
    """Per-tool declarations in the config apply through the dispatcher: a quota refuses, an approval suspends."""
    pytest.importorskip("mcp")
    command = {"command": sys.executable, "args": [str(HERE / "_chaos_server.py"), str(tmp_path / "j.txt")]}
    tools = {"lookup": {"read_only": True, "quota": {"limit": 1}}, "record": {"requires_approval": True}}
    configs = parse_config({"mcpServers": {"chaos": {**command, "tools": tools}}})
    store = Store(tmp_path / "state.db")
    with McpServers(configs, store=store, log_dir=tmp_path / "logs") as servers:
        dispatcher = Dispatcher(servers.servers["chaos"].registry, store=store)
        assert dispatcher.dispatch("lookup", {"id": "1"}).status == "ok"
        assert dispatcher.dispatch("lookup", {"id": "2"}).reason == "quota_exceeded"
        waiting = dispatcher.dispatch("record", {"id": "r"})
        assert waiting.status == "awaiting_approval"
        assert "effect r" not in (tmp_path / "j.txt").read_text()
        assert waiting.approval_id is not None
        assert dispatcher.approve(waiting.approval_id).value == "record r done"
        assert (tmp_path / "j.txt").read_text().count("effect r") == 1
        dispatcher.close()
