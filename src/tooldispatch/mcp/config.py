"""The ``mcpServers`` configuration file, as Claude Desktop, Cursor and other MCP clients write it.

::

    {"mcpServers": {
        "time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"], "env": {}, "cwd": "."},
        "notes": {"url": "http://127.0.0.1:8000/mcp", "headers": {"Authorization": "Bearer ..."}}
    }}

``command`` / ``args`` / ``env`` / ``cwd`` start a server over stdio; ``url`` / ``headers`` reach one over
Streamable HTTP. tooldispatch reads a few more keys per server, all optional:

- ``trust``: ``"none"`` (the default) or ``"annotations"``. A server's tool annotations are hints from an
  untrusted party: without trust they can only make dispatch more careful (``destructiveHint: true`` asks
  for approval), never less; with ``"annotations"`` a ``readOnlyHint`` makes a tool read-only (retried,
  run in parallel, no idempotency record) and ``destructiveHint: false`` is taken as said. Each such
  lowering is reported when the tools load.
- ``tools``: per-tool declarations of your own, which win over annotations: any of ``read_only``,
  ``concurrency_safe``, ``destructive``, ``requires_approval``, ``quota``, ``idempotency_fields``,
  ``timeout_s``, ``max_attempts``, ``result_max_chars``, ``idempotency_ttl_s``.
- ``timeout_s`` (every tool's default budget per call, 30) and ``startup_timeout_s`` (60).

Every problem is reported as one ``ConfigError`` line naming the file and the key.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tooldispatch.errors import ConfigError

Trust = Literal["none", "annotations"]
TOOL_KEYS = frozenset(
    {
        "read_only",
        "concurrency_safe",
        "destructive",
        "requires_approval",
        "quota",
        "idempotency_fields",
        "idempotency_ttl_s",
        "timeout_s",
        "max_attempts",
        "result_max_chars",
    }
)
_SERVER_KEYS = frozenset(
    {"command", "args", "env", "cwd", "url", "headers", "trust", "tools", "timeout_s", "startup_timeout_s", "type"}
)
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,48}$")


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One MCP server as configured.

    Attributes:
        name: the key under ``mcpServers``.
        command: the executable (stdio servers).
        args: its arguments.
        env: environment variables added to a minimal inherited set.
        cwd: its working directory.
        url: the Streamable HTTP endpoint (HTTP servers).
        headers: HTTP headers sent with every request (values never reach logs or traces).
        trust: whether the server's annotations may lower conservatism.
        tools: per-tool declarations that win over annotations.
        timeout_s: the default budget of each call.
        startup_timeout_s: how long starting and initializing the server may take.
        origin: the file it came from, for messages.
    """

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    trust: Trust = "none"
    tools: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    timeout_s: float = 30.0
    startup_timeout_s: float = 60.0
    origin: str = ""

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """``stdio`` when a command is configured, else ``http``."""
        return "stdio" if self.command is not None else "http"

    @property
    def identity(self) -> str:
        """What the server is, for pinning: the command line or the URL (never headers or env values)."""
        if self.command is not None:
            return " ".join([self.command, *self.args])
        return self.url or ""


def load_config(path: str | Path) -> list[ServerConfig]:
    """Read an ``mcpServers`` file.

    Raises:
        ConfigError: the file is missing, not JSON, or a server entry is malformed (one line saying which).
    """
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--mcp {where}: cannot read the file ({exc.strerror or exc})") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"--mcp {where}: not JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from exc
    return parse_config(data, origin=where, base=Path(path).resolve().parent)


def parse_config(data: Any, *, origin: str = "<config>", base: Path | None = None) -> list[ServerConfig]:
    """Check a decoded ``{"mcpServers": {...}}`` object and return its servers in file order.

    Args:
        data: the decoded JSON.
        origin: where it came from, for messages.
        base: the folder relative ``cwd`` values are taken from (default: the current folder).

    Raises:
        ConfigError: one line naming the file and the key at fault.
    """
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ConfigError(f'{origin}: expected {{"mcpServers": {{"<name>": {{...}}}}}} at the top level')
    if not servers:
        raise ConfigError(f"{origin}: mcpServers is empty; add at least one server")
    return [_server(origin, name, entry, base) for name, entry in servers.items()]


def _server(origin: str, name: str, entry: Any, base: Path | None) -> ServerConfig:
    where = f"{origin}: mcpServers.{name}"
    if not _NAME.match(name):
        raise ConfigError(f"{where}: server names are 1-48 letters, digits, '_', '.', '-'")
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: must be an object with 'command' (stdio) or 'url' (Streamable HTTP)")
    unknown = sorted(set(entry) - _SERVER_KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_SERVER_KEYS))}")
    command, url = entry.get("command"), entry.get("url")
    if (command is None) == (url is None):
        raise ConfigError(f"{where}: give exactly one of 'command' (stdio) or 'url' (Streamable HTTP)")
    if command is not None and (not isinstance(command, str) or not command):
        raise ConfigError(f"{where}.command: must be a non-empty string")
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
        raise ConfigError(f"{where}.url: must be an http:// or https:// URL")
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError(f"{where}.args: must be a list of strings")
    env = _strings(where, "env", entry.get("env", {}))
    headers = _strings(where, "headers", entry.get("headers", {}))
    cwd = entry.get("cwd")
    if cwd is not None:
        if not isinstance(cwd, str):
            raise ConfigError(f"{where}.cwd: must be a string")
        cwd = os.path.expanduser(cwd)
        if base is not None and not os.path.isabs(cwd):
            cwd = str(base / cwd)
    trust = entry.get("trust", "none")
    if trust not in ("none", "annotations"):
        raise ConfigError(f"{where}.trust: must be 'none' (the default) or 'annotations'")
    tools = entry.get("tools", {})
    if not isinstance(tools, dict):
        raise ConfigError(f"{where}.tools: must map tool names to declarations")
    for tool, decl in tools.items():
        if not isinstance(decl, dict):
            raise ConfigError(f"{where}.tools.{tool}: must be an object of declarations")
        bad = sorted(set(decl) - TOOL_KEYS)
        if bad:
            raise ConfigError(
                f"{where}.tools.{tool}: unknown key(s) {', '.join(bad)}; known: {', '.join(sorted(TOOL_KEYS))}"
            )
    return ServerConfig(
        name=name,
        command=command,
        args=tuple(args),
        env=env,
        cwd=cwd,
        url=url,
        headers=headers,
        trust=trust,
        tools={str(k): dict(v) for k, v in tools.items()},
        timeout_s=_positive(where, "timeout_s", entry.get("timeout_s", 30.0)),
        startup_timeout_s=_positive(where, "startup_timeout_s", entry.get("startup_timeout_s", 60.0)),
        origin=origin,
    )


def _strings(where: str, key: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ConfigError(f"{where}.{key}: must map names to string values")
    return dict(value)


def _positive(where: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{where}.{key}: must be a positive number of seconds")
    return float(value)
