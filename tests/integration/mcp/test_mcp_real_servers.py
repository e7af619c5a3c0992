"""Real MCP servers nobody here wrote (mcp-server-time, mcp-server-git from PyPI) over stdio, behind the dispatcher."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _mcp_helpers import alive, need

from tooldispatch.dispatch import Dispatcher
from tooldispatch.mcp.config import parse_config
from tooldispatch.mcp.source import McpServers
from tooldispatch.store import Store

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def time_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[McpServers, Dispatcher]]:
    """mcp-server-time twice: untrusted (annotations only add caution) and trusted."""
    need("mcp_server_time")
    folder = tmp_path_factory.mktemp("time")
    command = {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}
    configs = parse_config(
        {"mcpServers": {"time": {**command, "trust": "annotations"}, "plain": dict(command)}}, origin="mcp.json"
    )
    store = Store(folder / "state.db")
    servers = McpServers(configs, store=store, log_dir=folder / "logs")
    registry = servers.servers["time"].registry
    for tool in servers.servers["plain"].registry:
        registry.register(f"plain_{tool.name}", tool.fn, schema=dict(tool.schema), description=tool.description)
    dispatcher = Dispatcher(registry, store=store)
    yield servers, dispatcher
    servers.close()
    dispatcher.close()


def test_a_registry_built_from_pins_offers_the_tools_in_the_servers_order(tmp_path: Path) -> None:
    """A later run that builds its registry from the stored pins (no server started) offers the tools in the order
    the server listed them, as the first run did."""
    need("mcp_server_time")
    command = {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}
    configs = parse_config({"mcpServers": {"time": command}}, origin="mcp.json")
    store = Store(tmp_path / "state.db")
    with McpServers(configs, store=store, log_dir=tmp_path / "logs") as first:
        listed = [tool.name for tool in first.servers["time"].connection.listing]
        offered_first = first.servers["time"].registry.names
    with McpServers(configs, store=store, log_dir=tmp_path / "logs") as later:
        assert later.servers["time"].connection.starts == 0
        assert later.servers["time"].registry.names == offered_first == listed == ["get_current_time", "convert_time"]
    store.close()


def test_time_tools_come_with_their_schema_and_trusted_metadata(time_servers: tuple[McpServers, Dispatcher]) -> None:
    """inputSchema is the schema; a trusted readOnlyHint makes the tool read-only, and the lowering is said."""
    servers, dispatcher = time_servers
    tool = dispatcher.registry["get_current_time"]
    assert tool.schema["required"] == ["timezone"]
    assert (tool.read_only, tool.concurrency_safe, tool.source) == (True, True, "mcp:time")
    assert "MCP server 'time': get_current_time read-only (readOnlyHint, trusted)" in servers.notes
    assert "MCP server 'plain': get_current_time annotations ignored (untrusted)" in servers.notes
    plain = servers.servers["plain"].registry["get_current_time"]
    assert (plain.read_only, plain.side_effecting) == (None, True)


def test_time_in_tokyo_keeps_structured_content(time_servers: tuple[McpServers, Dispatcher]) -> None:
    """A call returns the server's structured content as the value; the trace records the pinned version."""
    servers, dispatcher = time_servers
    result = dispatcher.dispatch("get_current_time", {"timezone": "Asia/Tokyo"})
    assert result.status == "ok", result.content
    assert result.value["timezone"] == "Asia/Tokyo"
    assert result.value["datetime"].endswith("+09:00")
    assert json.loads(result.content) == result.value
    pin = next(p for p in servers.pins.approved("time") if p.tool == "get_current_time")
    assert result.trace.version == pin.sha256[:12]


def test_time_server_error_is_a_structured_recoverable_result(time_servers: tuple[McpServers, Dispatcher]) -> None:
    """An isError result from the server becomes the dispatcher's error envelope: recoverable, with a suggestion."""
    _, dispatcher = time_servers
    result = dispatcher.dispatch("get_current_time", {"timezone": "Mars/Olympus_Mons"})
    envelope = json.loads(result.content)
    assert (result.status, envelope["error"], envelope["recoverable"], envelope["attempts"]) == (
        "error",
        "tool_error",
        True,
        1,
    )
    assert "Invalid timezone" in envelope["message"]
    assert envelope["suggestion"] == "the request was refused; change the arguments or the plan"


def test_validation_and_idempotency_apply_to_mcp_tools(time_servers: tuple[McpServers, Dispatcher]) -> None:
    """Bad arguments never reach the server; an untrusted tool is side-effecting, so a repeat is replayed."""
    _, dispatcher = time_servers
    bad = dispatcher.dispatch("get_current_time", {"zone": "Asia/Tokyo"})
    assert (bad.status, bad.reason) == ("rejected", "validation")
    first = dispatcher.dispatch("plain_get_current_time", {"timezone": "Europe/Paris"})
    again = dispatcher.dispatch("plain_get_current_time", {"timezone": "Europe/Paris"})
    assert (first.status, again.reason, again.content) == ("ok", "idempotent_replay", first.content)


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """A git repository with one commit and one new file."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (["init", "-q"], ["config", "user.email", "t@example.com"], ["config", "user.name", "T"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    (repo / "a.txt").write_text("a\n")
    subprocess.run(["git", "add", "a.txt"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "first"], cwd=repo, check=True)
    (repo / "b.txt").write_text("b\n")
    return repo


def test_git_server_reads_writes_and_asks_approval_for_destructive_tools(git_repo: Path, tmp_path: Path) -> None:
    """mcp-server-git: status reads; add runs once per arguments; reset (destructiveHint) waits for a person."""
    need("mcp_server_git")
    configs = parse_config(
        {"mcpServers": {"git": {"command": sys.executable, "args": ["-m", "mcp_server_git", "-r", str(git_repo)]}}}
    )
    store = Store(tmp_path / "state.db")
    with McpServers(configs, store=store, log_dir=tmp_path / "logs") as servers:
        dispatcher = Dispatcher(servers.servers["git"].registry, store=store)
        repo = str(git_repo)
        status = dispatcher.dispatch("git_status", {"repo_path": repo})
        assert status.status == "ok"
        assert "b.txt" in status.value
        added = dispatcher.dispatch("git_add", {"repo_path": repo, "files": ["b.txt"]})
        replay = dispatcher.dispatch("git_add", {"repo_path": repo, "files": ["b.txt"]})
        assert (added.status, replay.reason) == ("ok", "idempotent_replay")
        staged = subprocess.run(
            ["git", "diff", "--cached", "--name-only"], cwd=git_repo, capture_output=True, text=True
        )
        assert staged.stdout.split() == ["b.txt"]
        reset = dispatcher.dispatch("git_reset", {"repo_path": repo})
        assert (reset.status, dispatcher.registry["git_reset"].destructive) == ("awaiting_approval", True)
        assert reset.approval_id is not None
        staged = subprocess.run(
            ["git", "diff", "--cached", "--name-only"], cwd=git_repo, capture_output=True, text=True
        )
        assert staged.stdout.split() == ["b.txt"]
        approved = dispatcher.approve(reset.approval_id)
        assert approved.status == "ok", approved.content
        staged = subprocess.run(
            ["git", "diff", "--cached", "--name-only"], cwd=git_repo, capture_output=True, text=True
        )
        assert staged.stdout.split() == []
        pids = list(servers.servers["git"].connection.pids)
        dispatcher.close()
    assert len(pids) == 1
    assert not alive(pids[0])
    assert (tmp_path / "logs" / "git.log").read_text().startswith("--- tooldispatch ")


def test_an_agent_calls_mcp_server_time_through_the_loop(time_servers: tuple[McpServers, Dispatcher]) -> None:
    """The agent loop offers the MCP tool to the model and dispatches its call (a scripted model stands in)."""
    from tooldispatch.agent import Agent, Budget
    from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn

    _, dispatcher = time_servers
    call = '<tool_call>{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}</tool_call>'
    backend = ScriptedBackend([ScriptedTurn(content=call), ScriptedTurn(content="It is evening in Tokyo.")])
    run = Agent(backend=backend, dispatcher=dispatcher, budget=Budget(max_turns=3)).run("What time is it in Tokyo?")
    assert run.final_answer == "It is evening in Tokyo."
    offered = [t.name for t in backend.requests[0].tools]
    assert "get_current_time" in offered
    tool_message = next(m for m in backend.requests[1].messages if m["role"] == "tool")
    assert json.loads(tool_message["content"])["timezone"] == "Asia/Tokyo"


def test_the_mcp_bench_row_compares_each_path_with_the_sdk_called_from_the_same_place() -> None:
    """The benchmark's two rows each time their own SDK baseline (on the connection's loop, and from a thread), as
    whole calls and as the time left outside each call's own SDK call_tool."""
    need("mcp_server_time")
    from tooldispatch.bench.dispatch import run_mcp_overhead

    result = run_mcp_overhead(iterations=50, block=25)
    assert (result.in_loop.wall.bare.name, result.sync.wall.bare.name) == (
        "SDK call_tool on the connection's loop",
        "SDK call_tool from another thread",
    )
    assert (result.in_loop.outside.dispatched.name, result.sync.outside.dispatched.name) == (
        "adispatch on the connection's loop, outside call_tool",
        "dispatch() from another thread, outside call_tool",
    )
    paths = (result.in_loop, result.sync)
    assert [t.n for p in paths for t in (p.wall.bare, p.wall.dispatched, p.outside.bare, p.outside.dispatched)] == [
        50
    ] * 8
    # Each call's SDK time is taken out of it, so what is left is below the whole call, variant by variant.
    assert all(
        o.median_us < w.median_us
        for p in paths
        for o, w in ((p.outside.bare, p.wall.bare), (p.outside.dispatched, p.wall.dispatched))
    )
