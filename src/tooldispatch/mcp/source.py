"""MCP servers as a tool source: one ``Registry`` per server, whose tools call the server through the dispatcher.

Each MCP tool is registered like any other: its ``inputSchema`` is the schema (checked as JSON Schema, and
scanned for poisoning with its description); annotations and the config's declarations give its metadata
(``convert.metadata``); its version is the first 12 hex digits of the pinned definition hash, its source
``mcp:<server>``. Timeouts, retries, idempotency, quotas, approvals, bounding and traces are the
dispatcher's, unchanged.

Servers start lazily: when the store already holds approved pins for every configured server, the
registries are built from them and no server starts until its first call. Otherwise the server is started
once to list its tools. Every start compares the listing with the pins; a tool whose definition changed is
blocked (its calls refused with the approval command) until a person approves the new version; until the
next run the model keeps seeing the approved definition, never the new one.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tooldispatch.dispatch.poisoning import scan_tool
from tooldispatch.dispatch.registry import Registry
from tooldispatch.errors import ConfigError, RegistrationError, ToolError
from tooldispatch.mcp.config import ServerConfig
from tooldispatch.mcp.connection import Connection
from tooldispatch.mcp.convert import metadata
from tooldispatch.mcp.pins import Pin, Pins, definition_hash, definition_of
from tooldispatch.mcp.supervisor import Supervisor
from tooldispatch.store import StateStore

_BAD = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(slots=True)
class ServerTools:
    """One server's tools and connection.

    Attributes:
        config: the server.
        connection: its supervised connection.
        registry: its tools, under the server's own names (sanitized where our names are stricter).
        names: registry name → the tool's name on the server.
        blocked: the server's tool name → the pin id of a changed definition waiting for approval.
        notes: what a person should know (trust lowering caution, renamed tools, changed tools, poisoning).
    """

    config: ServerConfig
    connection: Connection
    registry: Registry
    names: dict[str, str] = field(default_factory=dict)
    blocked: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class McpServers:
    """The tools of a set of MCP servers, with their supervisor.

    Args:
        servers: the configured servers.
        store: the dispatcher's store (pins live there).
        log_dir: where each server's log goes (``<server>.log``; default: a new temporary folder).
        lazy: build from approved pins without starting servers when every server has them.
        backoff_base_s: first restart delay after a crash (doubles per consecutive failure).
        backoff_max_s: the longest restart delay.

    Raises:
        ConfigError: two servers share a name, or a server cannot be started to list its tools.
    """

    def __init__(
        self,
        servers: Sequence[ServerConfig],
        *,
        store: StateStore,
        log_dir: str | Path | None = None,
        lazy: bool = True,
        backoff_base_s: float = 0.05,
        backoff_max_s: float = 5.0,
    ) -> None:
        names = [s.name for s in servers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ConfigError(f"MCP server name(s) {', '.join(dupes)} appear in more than one config; rename one")
        self.pins = Pins(store)
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="tooldispatch-mcp-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.supervisor = Supervisor()
        self.servers: dict[str, ServerTools] = {}
        try:
            for config in servers:
                self.servers[config.name] = self._load(config, lazy, backoff_base_s, backoff_max_s)
        except BaseException:
            self.close()
            raise

    @property
    def notes(self) -> list[str]:
        """Every server's notes, in order."""
        return [n for s in self.servers.values() for n in s.notes]

    def log_path(self, server: str) -> Path:
        """The log file of a server."""
        return self.log_dir / f"{server}.log"

    def close(self) -> None:
        """Stop every server and the supervisor thread."""
        self.supervisor.close()

    def __enter__(self) -> McpServers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ loading

    def _load(self, config: ServerConfig, lazy: bool, base: float, most: float) -> ServerTools:
        connection = Connection(config, self.log_path(config.name), backoff_base_s=base, backoff_max_s=most)
        server = ServerTools(config, connection, Registry())
        connection.on_listing = lambda listing: self._check(server, listing)
        self.supervisor.on_close(connection.stop)
        pinned = self.pins.approved(config.name) if lazy else []
        if pinned:
            definitions = [p.definition for p in pinned]
        else:
            try:
                self.supervisor.run(connection.client(), timeout_s=config.startup_timeout_s + 5)
            except ToolError as exc:
                raise ConfigError(str(exc)) from None
            definitions = self._offered(server, connection.listing)
        for definition in definitions:
            self._register(server, definition)
        return server

    def _check(self, server: ServerTools, listing: list[Any]) -> None:
        """Compare a fresh listing with the pins; block changed tools (runs on every start)."""
        now = time.time()
        for i, tool in enumerate(listing):
            # One listing's new pins are stamped a microsecond apart, in the server's order: a later run that builds
            # the registry from the pins (ordered by first_seen) offers the tools in that order, as the model saw them.
            verdict = self.pins.check(server.config.name, definition_of(tool), now + i * 1e-6)
            if verdict.status == "changed":
                if tool.name not in server.blocked:
                    findings = scan_tool(tool.description or "", tool.input_schema)
                    flagged = f"; the new description is flagged as possibly poisoned: {'; '.join(findings)}"
                    note = verdict.message() + (flagged if findings else "")
                    server.notes.append(note)
                    with contextlib.suppress(OSError), server.connection.log_path.open("a", encoding="utf-8") as log:
                        log.write(f"--- tooldispatch {note}\n")
                server.blocked[tool.name] = verdict.pin.id
            else:
                server.blocked.pop(tool.name, None)

    def _offered(self, server: ServerTools, listing: list[Any]) -> list[dict[str, Any]]:
        """The definitions to offer from a first listing: the listed one, or the approved one when it changed."""
        approved = {p.tool: p for p in self.pins.approved(server.config.name)}
        out = []
        for tool in listing:
            if tool.name in server.blocked:
                pin: Pin | None = approved.get(tool.name)
                if pin is not None:
                    out.append(pin.definition)
                continue
            out.append(definition_of(tool))
        return out

    def _register(self, server: ServerTools, definition: dict[str, Any]) -> None:
        config = server.config
        remote = str(definition["name"])
        name = _BAD.sub("_", remote)[:64] or "tool"
        if name[0].isdigit() or name[0] in ".-":
            name = f"_{name}"[:64]
        if name != remote:
            server.notes.append(f"MCP server {config.name!r}: tool {remote!r} is offered as {name!r}")
        kw, note = metadata(config, remote, definition.get("annotations"))
        digest = definition_hash(definition)
        try:
            server.registry.register(
                name,
                _caller(self, server, remote, float(kw["timeout_s"]) / 2),
                schema=definition.get("input_schema") or {"type": "object", "properties": {}},
                description=str(definition.get("description") or ""),
                version=digest[:12],
                source=f"mcp:{config.name}",
                **kw,
            )
        except RegistrationError as exc:
            server.notes.append(f"MCP server {config.name!r}: tool {remote!r} skipped: {exc}")
            return
        server.names[name] = remote
        if note:
            server.notes.append(f"MCP server {config.name!r}: {remote} {note}")
        server.notes.extend(w for w in server.registry.warnings if w not in server.notes)

    async def call(
        self, server: ServerTools, remote: str, arguments: dict[str, Any], *, start_wait_s: float | None = None
    ) -> Any:
        """Call a server's tool from any event loop, unless its definition changed and awaits approval.

        A server that is not up yet is waited for at most ``start_wait_s`` (half the tool's budget when called as a
        tool), so a slow start fails the call as "nothing ran" (retryable) before the tool's timer could call its
        outcome unknown.
        """
        pin_id = server.blocked.get(remote)
        if pin_id is not None:
            pin = self.pins.get(pin_id)
            if pin is None or pin.state != "approved":
                raise ToolError(_blocked(server.config.name, remote, pin_id), retryable=False, before_execution=True)
            server.blocked.pop(remote, None)
        return await self.supervisor.arun(self._call(server, remote, arguments, start_wait_s))

    async def _call(self, server: ServerTools, remote: str, arguments: dict[str, Any], wait_s: float | None) -> Any:
        await server.connection.client(wait_s)
        pin_id = server.blocked.get(remote)
        if pin_id is not None:
            raise ToolError(_blocked(server.config.name, remote, pin_id), retryable=False, before_execution=True)
        return await server.connection.call(remote, arguments, start_wait_s=wait_s)


def _blocked(server: str, tool: str, pin_id: str) -> str:
    return (
        f"MCP server {server!r} changed tool {tool!r} since it was approved, so it is blocked until a person "
        f"reviews the change (tooldispatch approvals approve {pin_id})"
    )


def _caller(servers: McpServers, server: ServerTools, remote: str, start_wait_s: float) -> Any:
    async def call_mcp_tool(**arguments: Any) -> Any:
        return await servers.call(server, remote, arguments, start_wait_s=start_wait_s)

    call_mcp_tool.__qualname__ = f"mcp:{server.config.name}:{remote}"
    return call_mcp_tool
