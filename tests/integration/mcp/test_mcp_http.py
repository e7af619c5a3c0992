"""A server written with the SDK, over Streamable HTTP on 127.0.0.1: hanging, crashing, erroring, large results,
and a description that changes between two listings (blocked until a person approves it)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from _mcp_helpers import write_config
from typer.testing import CliRunner

from tooldispatch.cli import app
from tooldispatch.dispatch import Dispatcher
from tooldispatch.mcp.config import load_config
from tooldispatch.mcp.source import McpServers
from tooldispatch.store import Store

pytestmark = pytest.mark.integration


def _servers(url: str, tmp_path: Path, store: Store, **extra: object) -> McpServers:
    config = write_config(
        tmp_path / "mcp.json",
        {"web": {"url": url, "trust": "annotations", "tools": {"hang": {"timeout_s": 0.5}}, **extra}},
    )
    return McpServers(load_config(config), store=store, log_dir=tmp_path / "logs")


def test_hang_fail_big_structured_and_crash(http_server: tuple[str, subprocess.Popen[str]], tmp_path: Path) -> None:
    """Each misbehaviour ends as the dispatcher says: timeout retried (read-only), isError, bounding, crash unknown."""
    url, proc = http_server
    store = Store(tmp_path / "state.db")
    with _servers(url, tmp_path, store) as servers:
        dispatcher = Dispatcher(servers.servers["web"].registry, store=store)
        hang = dispatcher.dispatch("hang", {"text": "x"})
        assert (hang.status, hang.reason, hang.trace.attempts) == ("error", "timeout", 2)
        fail = json.loads(dispatcher.dispatch("fail", {"text": "r-9"}).content)
        assert (fail["error"], fail["message"], fail["recoverable"]) == (
            "tool_error",
            "fail failed: no such record: r-9",
            True,
        )
        big = dispatcher.dispatch("big", {"text": "x"})
        assert big.status == "ok"
        assert len(big.content) < 8200
        assert big.trace.bounded_chars > 40_000
        assert dispatcher.full_result(big.trace.id) == json.dumps("x" * 50_000)
        weather = dispatcher.dispatch("weather", {"city": "Oslo"})
        assert weather.value == {"city": "Oslo", "celsius": 21}
        crash = dispatcher.dispatch("crash", {"text": "x"})
        envelope = json.loads(crash.content)
        assert (crash.status, envelope["error"], envelope["recoverable"], crash.trace.attempts) == (
            "error",
            "exception",
            False,
            1,
        )
        assert "while crash was in flight" in envelope["message"]
        again = dispatcher.dispatch("crash", {"text": "x"})
        assert again.reason == "idempotency_conflict"
        assert proc.wait(10) == 3
        down = dispatcher.dispatch("echo", {"text": "x"})
        envelope = json.loads(down.content)
        assert (down.reason, envelope["recoverable"], down.trace.attempts) == ("tool_error", True, 2)
        assert "could not be started (ConnectError: " in envelope["message"]
        dispatcher.close()


def test_a_changed_description_is_blocked_until_approved(
    http_server: tuple[str, subprocess.Popen[str]], tmp_path: Path
) -> None:
    """Rug pull: the second listing changes a description; the tool is blocked, the scan flags it, a person approves."""
    url, _ = http_server
    store_path = tmp_path / "state.db"
    store = Store(store_path)
    with _servers(url, tmp_path, store) as first:
        assert "weather" in first.servers["web"].registry
        assert first.servers["web"].blocked == {}
    with _servers(url, tmp_path, store) as second:
        web = second.servers["web"]
        dispatcher = Dispatcher(web.registry, store=store)
        assert web.connection.starts == 0
        assert web.registry["weather"].description == "Current weather in a city."
        blocked = dispatcher.dispatch("weather", {"city": "Oslo"})
        envelope = json.loads(blocked.content)
        assert (blocked.status, envelope["error"], envelope["recoverable"]) == ("error", "tool_error", True)
        pin_id = web.blocked["weather"]
        assert f"tooldispatch approvals approve {pin_id}" in envelope["message"]
        [note] = [n for n in second.notes if "changed tool 'weather'" in n]
        assert "flagged as possibly poisoned" in note
        assert "exfiltration" in note
        assert note in (tmp_path / "logs" / "web.log").read_text()
        assert dispatcher.dispatch("echo", {"text": "still fine"}).value == "still fine"
        listed = CliRunner().invoke(app, ["approvals", "list", "--store", str(store_path)])
        assert pin_id in listed.output
        approved = CliRunner().invoke(app, ["approvals", "approve", pin_id, "--store", str(store_path)])
        assert approved.exit_code == 0, approved.output
        assert f"{pin_id}: MCP server 'web' tool 'weather'" in approved.output
        after = dispatcher.dispatch("weather", {"city": "Oslo"})
        assert after.value == {"city": "Oslo", "celsius": 21}
        dispatcher.close()
