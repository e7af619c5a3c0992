"""The dispatch layer as an MCP server: ``tooldispatch mcp serve``.

Any MCP client (Claude Desktop, Cursor, an agent SDK) connects to the gateway instead of to its servers and
gets, for every call, what the dispatcher gives: validation with repair, the tool's own timer, retries by
the policy, idempotency, quotas, approvals, bounding and a persisted trace. ``tools/list`` offers the
dispatcher's registry (MCP servers' tools with their approved definitions, and Python tools); ``tools/call``
is ``Dispatcher.adispatch``. A call that did not produce a result (rejected, failed, waiting for approval)
comes back with ``isError`` and the dispatcher's JSON envelope as its text, which says what to do; a call
suspended for approval gives its ``approval_id``, and once a person approved it (``tooldispatch approvals
approve``), calling again with the same arguments returns the stored result.

Transports: stdio, or Streamable HTTP bound to 127.0.0.1 (DNS-rebinding protection on, as the SDK sets it up
for loopback hosts).
"""

from __future__ import annotations

import json
import os
from typing import Any

import mcp_types as types
from mcp.server import Server

from tooldispatch.dispatch import Dispatcher

LOOPBACK = "127.0.0.1"


def build_server(dispatcher: Dispatcher, *, session_id: str | None = None, name: str = "tooldispatch") -> Server[Any]:
    """An MCP ``Server`` whose tools are the dispatcher's registry, each call going through the dispatcher.

    Args:
        dispatcher: the dispatcher (its registry and store).
        session_id: the dispatcher session of every call: scope of quotas and idempotency keys (default: one
            fresh id for this server's lifetime).
        name: the server name clients see.
    """
    session = session_id or f"gateway-{os.urandom(6).hex()}"
    tools = [
        types.Tool(name=t.name, description=t.description, input_schema=dict(t.schema), annotations=_annotations(t))
        for t in dispatcher.registry
    ]

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        result = await dispatcher.adispatch(
            params.name, dict(params.arguments or {}), session_id=session, trigger="mcp_client"
        )
        structured: Any = None
        if result.trace.bounded_chars:
            structured = None
        elif result.ok and isinstance(result.value, dict):
            structured = result.value
        else:
            try:
                structured = json.loads(result.content)
            except ValueError:
                structured = None
        if not isinstance(structured, dict):
            structured = None
        return types.CallToolResult(
            content=[types.TextContent(text=result.content)],
            structured_content=structured,
            is_error=not result.ok,
        )

    return Server(name, on_list_tools=list_tools, on_call_tool=call_tool)


def _annotations(tool: Any) -> types.ToolAnnotations:
    """What the dispatcher knows of the tool, told as hints (a client may show them)."""
    return types.ToolAnnotations(
        read_only_hint=tool.read_only is True,
        destructive_hint=tool.destructive is not False and tool.read_only is not True,
    )


async def serve_stdio(server: Server[Any]) -> None:
    """Serve over this process's stdin and stdout until the client closes stdin."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(server: Server[Any], *, port: int, ready: Any = None) -> None:
    """Serve Streamable HTTP on 127.0.0.1:``port`` (``/mcp``) until cancelled.

    Args:
        server: the gateway server.
        port: the TCP port (0: any free port; ``ready`` is called with the one bound).
        ready: called with the bound port once listening.
    """
    import socket

    import uvicorn

    app = server.streamable_http_app(host=LOOPBACK)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((LOOPBACK, port))
    sock.listen(128)
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    if ready is not None:
        ready(sock.getsockname()[1])
    try:
        await web.serve(sockets=[sock])
    finally:
        sock.close()
