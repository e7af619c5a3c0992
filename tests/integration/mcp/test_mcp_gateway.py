"""The gateway (`tooldispatch mcp serve`) tested with the SDK's own client, over stdio and Streamable HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from _mcp_helpers import HERE, alive, need, write_config
from typer.testing import CliRunner

import tooldispatch
from tooldispatch.cli import app

pytestmark = pytest.mark.integration
SRC = str(Path(tooldispatch.__file__).resolve().parents[1])


def _setup(tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    need("mcp")
    config = write_config(
        tmp_path / "mcp.json",
        {
            "chaos": {
                "command": sys.executable,
                "args": [str(HERE / "_chaos_server.py"), str(tmp_path / "journal.txt")],
                "trust": "annotations",
            }
        },
    )
    args = [
        "-m",
        "tooldispatch",
        "mcp",
        "serve",
        "--mcp",
        str(config),
        "--tools",
        f"{HERE / '_gateway_tools.py'}:registry",
        "--store",
        str(tmp_path / "state.db"),
        "--mcp-logs",
        str(tmp_path / "logs"),
    ]
    env = {"GATEWAY_EFFECTS": str(tmp_path / "effects.txt"), "PYTHONPATH": SRC}
    return args, env


def test_gateway_over_stdio_lists_calls_refuses_by_quota_and_suspends_for_approval(tmp_path: Path) -> None:
    """The SDK client lists, calls (MCP and Python tools), meets a quota, and gets a call approved by a person."""
    from mcp import Client, StdioServerParameters

    args, env = _setup(tmp_path)
    params = StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(tmp_path))
    effects = tmp_path / "effects.txt"

    async def session() -> None:
        async with Client(params) as client:
            names = sorted(t.name for t in (await client.list_tools()).tools)
            assert names == ["lookup", "record", "reserve", "wipe"]
            looked = await client.call_tool("lookup", {"id": "x1"})
            assert (looked.is_error, looked.content[0].text) == (False, '"lookup x1 done"')
            assert (await client.call_tool("reserve", {"slot": "a"})).structured_content == {"reserved": "a"}
            assert not (await client.call_tool("reserve", {"slot": "b"})).is_error
            refused = await client.call_tool("reserve", {"slot": "c"})
            assert refused.is_error
            assert refused.structured_content["error"] == "quota_exceeded"
            bad = await client.call_tool("reserve", {"slot": 5})
            assert (bad.is_error, bad.structured_content["error"]) == (True, "validation")
            waiting = await client.call_tool("wipe", {"target": "disk"})
            assert waiting.is_error
            assert waiting.structured_content["status"] == "awaiting_approval"
            approval_id = waiting.structured_content["approval_id"]
            assert effects.read_text().splitlines() == ["reserve a", "reserve b"]
            approved = await anyio.to_thread.run_sync(
                lambda: CliRunner().invoke(
                    app,
                    [
                        "approvals",
                        "approve",
                        approval_id,
                        "--tools",
                        f"{HERE / '_gateway_tools.py'}:registry",
                        "--store",
                        str(tmp_path / "state.db"),
                    ],
                    env={"GATEWAY_EFFECTS": str(effects)},
                )
            )
            assert approved.exit_code == 0, approved.output
            again = await client.call_tool("wipe", {"target": "disk"})
            assert (again.is_error, again.structured_content) == (False, {"wiped": "disk"})

    anyio.run(session)
    assert effects.read_text().splitlines() == ["reserve a", "reserve b", "wipe disk"]


def test_gateway_over_streamable_http_on_loopback(tmp_path: Path) -> None:
    """`--transport http --port 0` serves on 127.0.0.1 and answers the SDK client's list and call."""
    from mcp import Client

    args, env = _setup(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, *args, "--transport", "http", "--port", "0"],
        env={**os.environ, **env},
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert proc.stderr is not None
        url = ""
        for line in proc.stderr:
            if line.startswith("serving MCP on "):
                url = line.split()[-1]
                break
        assert url.startswith("http://127.0.0.1:")

        async def session() -> None:
            async with Client(url) as client:
                assert len((await client.list_tools()).tools) == 4
                assert (await client.call_tool("lookup", {"id": "h1"})).content[0].text == '"lookup h1 done"'
                result = await client.call_tool("reserve", {"slot": "h"})
                assert json.loads(result.content[0].text) == {"reserved": "h"}

        anyio.run(session)
        proc.terminate()
        assert proc.wait(20) == 0
        chaos_log = (tmp_path / "logs" / "chaos.log").read_text()
        [pid] = [int(line.split()[2]) for line in chaos_log.splitlines() if line.startswith("chaos server ")]
        assert not alive(pid)
    finally:
        proc.kill()
        proc.wait(20)
