"""``tooldispatch mcp serve``: the dispatch layer as an MCP gateway in front of MCP servers and Python tools."""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Annotated, Literal

import typer

from tooldispatch.errors import TooldispatchError


def serve(
    mcp: Annotated[
        list[Path] | None, typer.Option("--mcp", help="An mcpServers JSON file to serve the tools of. Repeatable.")
    ] = None,
    tools: Annotated[
        list[str] | None,
        typer.Option("--tools", help="Also serve 'demo', 'file.py[:attr]' or 'package.module:attr'. Repeatable."),
    ] = None,
    transport: Annotated[
        str, typer.Option(help="stdio (for a client that starts the gateway) or http (Streamable HTTP).")
    ] = "stdio",
    port: Annotated[int, typer.Option(min=0, max=65535, help="HTTP port on 127.0.0.1 (0: any free port).")] = 8765,
    store: Annotated[Path, typer.Option(help="SQLite state: traces, idempotency, approvals, MCP pins.")] = Path(
        "state.db"
    ),
    session: Annotated[
        str | None, typer.Option(help="Dispatcher session of every call (quota and idempotency scope).")
    ] = None,
    mcp_logs: Annotated[Path | None, typer.Option("--mcp-logs", help="Folder for the servers' stderr logs.")] = None,
) -> None:
    """Serve the configured tools as one MCP server, every call going through the dispatch layer.

    Notes (renamed tools, trust, blocked tools, where the logs are) go to stderr; with --transport stdio,
    stdout carries only the protocol.
    """
    import anyio

    from tooldispatch.dispatch import Dispatcher
    from tooldispatch.mcp.gateway import build_server, serve_http, serve_stdio
    from tooldispatch.sources import load_sources
    from tooldispatch.store import Store

    if transport not in ("stdio", "http"):
        typer.echo(f"--transport must be stdio or http, not {transport!r}", err=True)
        raise typer.Exit(2)
    if not mcp and not tools:
        typer.echo("nothing to serve: pass --mcp mcp.json and/or --tools file.py:registry", err=True)
        raise typer.Exit(2)
    kind: Literal["stdio", "http"] = "stdio" if transport == "stdio" else "http"
    try:
        st = Store(store)
        sources = load_sources(tools or [], mcp or [], store=st, mcp_log_dir=mcp_logs)
    except TooldispatchError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    for note in sources.notes:
        print(f"note: {note}", file=sys.stderr, flush=True)
    dispatcher = Dispatcher(sources.registry, store=st, tool_loop=sources.tool_loop)
    server = build_server(dispatcher, session_id=session)

    def ready(bound: int) -> None:
        print(f"serving MCP on http://127.0.0.1:{bound}/mcp", file=sys.stderr, flush=True)

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)  # servers are stopped and reaped on SIGTERM too, not left behind
    serving = serve_stdio(server) if kind == "stdio" else serve_http(server, port=port, ready=ready)
    try:
        if sources.mcp is not None:
            # On the loop that owns the MCP connections, calls reach them without a hop between threads.
            sources.mcp.supervisor.run(serving)
        else:
            anyio.run(lambda: serving)
    except KeyboardInterrupt:
        pass
    finally:
        sources.close()
        dispatcher.close()


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``tooldispatch mcp ...`` to the command line."""
    mcp_app = typer.Typer(help="MCP: serve the dispatch layer as an MCP server (gateway).", no_args_is_help=True)
    mcp_app.command("serve")(serve)
    app.add_typer(mcp_app, name="mcp")
