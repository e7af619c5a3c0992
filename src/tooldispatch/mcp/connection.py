"""One supervised connection to an MCP server, living on the supervisor's event loop.

The server is started on first use (``client()``), over stdio (``StdioProcess``, stderr appended to the
server's log file with a line per start) or Streamable HTTP. Each start lists the tools and hands the
listing to ``on_listing`` (the pins check). A stdio server that exits is noticed at once (its stdout ends)
and reaped; the next call starts it again after a backoff that doubles with each consecutive failure
(``backoff_base_s`` up to ``backoff_max_s``) and resets after a call succeeds. A call whose request was
in flight when the server went away raises ``ServerLost`` (outcome unknown): it is never sent again
here; whether it is retried is the dispatcher's decision (read-only tools only).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import anyio
import httpx2
import mcp_types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tooldispatch.errors import ToolError
from tooldispatch.mcp.config import ServerConfig
from tooldispatch.mcp.convert import ServerLost, protocol_error, result_value
from tooldispatch.mcp.stdio import StdioProcess

CONNECTION_CLOSED = mcp_types.CONNECTION_CLOSED
_LIST_PAGES = 100
_GONE = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError, httpx2.TransportError)


class Connection:
    """A lazily started, restarted-on-crash connection to one server.

    Args:
        config: the server.
        log_path: the file the server's stderr (stdio) and the connection's events are appended to.
        on_listing: called with the tool list (``mcp_types.Tool``) after every start.
        backoff_base_s: delay before the first restart after a failure.
        backoff_max_s: the longest delay between restarts.
    """

    def __init__(
        self,
        config: ServerConfig,
        log_path: Path,
        *,
        on_listing: Callable[[list[Any]], None] | None = None,
        backoff_base_s: float = 0.05,
        backoff_max_s: float = 5.0,
    ) -> None:
        self.config = config
        self.log_path = log_path
        self.on_listing = on_listing
        self.backoff_base_s = backoff_base_s
        self.backoff_max_s = backoff_max_s
        self.starts = 0
        self.failures = 0
        self.pids: list[int] = []
        self.listing: list[Any] = []
        self._client: Client | None = None
        self._process: StdioProcess | None = None
        self._task: asyncio.Task[None] | None = None
        self._starting: asyncio.Task[Client] | None = None
        self._ended_with: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._lock: asyncio.Lock | None = None
        self._broken = False
        self._gone_at = 0.0

    @property
    def pid(self) -> int | None:
        """The running stdio server's process id."""
        return self._process.pid if self._process is not None and self._process.alive else None

    @property
    def ready(self) -> bool:
        """Whether the server is started, initialized and (for stdio) still running."""
        return self._client is not None and self._healthy()

    async def client(self, wait_s: float | None = None) -> Client:
        """The connected client, starting (or restarting, after the backoff) the server when needed.

        Args:
            wait_s: how long this caller waits for a start in progress; the start itself goes on (shielded), so
                a later call finds the server ready.

        Raises:
            ToolError: the server could not be started or initialized, or is still starting after ``wait_s``
                (``before_execution``: nothing ran).
        """
        if self._client is not None and self._healthy():
            return self._client  # up: nothing to start, so no lock (the check and the return share one loop turn)
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._client is not None and self._healthy():
                return self._client
            if self._starting is None or self._starting.done():
                self._starting = asyncio.create_task(self._restart())
            starting = self._starting
        try:
            return await asyncio.wait_for(asyncio.shield(starting), wait_s)
        except TimeoutError:
            raise ToolError(
                f"MCP server {self.config.name!r} is still starting after {wait_s:g} s; try again shortly",
                before_execution=True,
            ) from None

    async def _restart(self) -> Client:
        await self._teardown()
        delay = backoff_s(self.failures, self.backoff_base_s, self.backoff_max_s)
        if delay:
            await asyncio.sleep(max(0.0, self._gone_at + delay - time.monotonic()))
        try:
            return await asyncio.wait_for(self._start(), self.config.startup_timeout_s)
        except Exception as exc:
            self._note_gone()
            await self._teardown()
            why = "timed out" if isinstance(exc, TimeoutError) else _short(exc)
            raise ToolError(
                f"MCP server {self.config.name!r} could not be started ({why}); see its log {self.log_path}",
                before_execution=True,
            ) from None

    async def call(self, tool: str, arguments: dict[str, Any], *, start_wait_s: float | None = None) -> Any:
        """Call a tool and return its result as a JSON value (see ``convert`` for how failures map).

        Args:
            tool: the tool's name on the server.
            arguments: its arguments.
            start_wait_s: how long to wait for the server to start before giving up with nothing sent.
        """
        client = await self.client(start_wait_s)
        if self._process is not None and not self._process.alive:
            self._note_gone()
            raise ToolError(
                f"MCP server {self.config.name!r} had exited before the call was sent", before_execution=True
            )
        try:
            result = await client.call_tool(tool, arguments)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise await self._lost(tool) from None
            raise protocol_error(self.config.name, exc.code, exc.message) from None
        except _GONE:
            raise await self._lost(tool) from None
        self.failures = 0
        return result_value(result)

    async def list_tools(self) -> list[Any]:
        """Every tool the server lists now (all pages)."""
        client = await self.client()
        return await _list(client)

    async def stop(self) -> None:
        """Stop the server (stdio: close stdin, then end its process group) and wait until it is reaped."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            starting, self._starting = self._starting, None
            if starting is not None and not starting.done():
                starting.cancel()
                with contextlib.suppress(BaseException):
                    await starting
            await self._teardown()

    # ------------------------------------------------------------------ internals

    def _healthy(self) -> bool:
        if self._broken:
            return False
        return self._process is None or self._process.alive

    def _note_gone(self) -> None:
        self._broken = True
        self.failures += 1
        self._gone_at = time.monotonic()

    async def _lost(self, tool: str) -> Exception:
        """The error for a call whose connection closed: nothing ran when an HTTP server refused the connection
        (the request was never delivered), else the outcome is unknown."""
        self._note_gone()
        task = self._task
        if self._process is None and task is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(task), 1.0)
            if any(isinstance(e, httpx2.ConnectError | ConnectionRefusedError) for e in _leaves(self._ended_with)):
                return ToolError(
                    f"MCP server {self.config.name!r} refused the connection; {tool} was not sent",
                    before_execution=True,
                )
        status = None
        if self._process is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._process.exited.wait(), 1.0)
            for _ in range(50):
                status = self._process.returncode
                if status is not None:
                    break
                await asyncio.sleep(0.01)
        how = f"exited (status {status})" if status is not None else "went away"
        return ServerLost(
            f"MCP server {self.config.name!r} {how} while {tool} was in flight; see its log {self.log_path}"
        )

    async def _start(self) -> Client:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Client] = loop.create_future()
        self._stop = asyncio.Event()
        self._broken = False
        self._ended_with = None
        self.starts += 1
        self._task = asyncio.create_task(self._run(ready, self._stop))
        client = await ready
        self._client = client
        return client

    async def _run(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        log = self.log_path.open("a", encoding="utf-8", errors="replace")
        try:
            async with self._transport(log) as transport, Client(transport, cache=None) as client:
                listing = await _list(client)
                self.listing = listing
                if self.on_listing is not None:
                    self.on_listing(listing)
                if self._process is not None and self._process.pid is not None:
                    self.pids.append(self._process.pid)
                ready.set_result(client)
                waits: list[asyncio.Task[Any]] = [asyncio.create_task(stop.wait())]
                if self._process is not None:
                    waits.append(asyncio.create_task(self._process.exited.wait()))
                try:
                    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for w in waits:
                        w.cancel()
                if not stop.is_set():
                    self._note_gone()
                    _log(log, f"server exited (status {self._process.returncode if self._process else '?'})")
        except Exception as exc:
            self._ended_with = exc
            if not ready.done():
                ready.set_exception(exc)
            else:
                self._note_gone()
            _log(log, f"connection ended: {_short(exc)}")
        finally:
            self._client = None
            log.close()

    @contextlib.asynccontextmanager
    async def _transport(self, log: IO[str]) -> Any:
        if self.config.command is not None:
            _log(log, f"starting {self.config.identity}")
            self._process = StdioProcess(self.config, log)
            async with self._process.connect() as streams:
                yield _Streams(streams)
            return
        assert self.config.url is not None
        _log(log, f"connecting to {self.config.url}")
        async with (
            httpx2.AsyncClient(headers=dict(self.config.headers), timeout=httpx2.Timeout(30.0, read=300.0)) as http,
            streamable_http_client(self.config.url, http_client=http) as streams,
        ):
            yield _Streams(streams)

    async def _teardown(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        if self._stop is not None:
            self._stop.set()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(task), 15.0)
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        self._client = None


def backoff_s(failures: int, base_s: float, most_s: float) -> float:
    """The delay before a restart after ``failures`` consecutive failures: none, then doubling up to ``most_s``."""
    if failures <= 0:
        return 0.0
    return float(min(most_s, base_s * 2 ** (failures - 1)))


class _Streams:
    """Already-open streams, handed to ``Client`` as its transport (it enters and exits nothing)."""

    def __init__(self, streams: Any) -> None:
        self.streams = streams

    async def __aenter__(self) -> Any:
        return self.streams

    async def __aexit__(self, *exc: object) -> None:
        return None


async def _list(client: Client) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(_LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _log(log: IO[str], line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        log.write(f"--- tooldispatch {time.strftime('%Y-%m-%d %H:%M:%S')} {line}\n")
        log.flush()


def _leaves(exc: BaseException | None) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, or the exception itself."""
    if exc is None:
        return []
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _short(exc: BaseException) -> str:
    leaves = _leaves(exc)
    first = leaves[0] if leaves else exc
    text = str(first).strip().splitlines()
    name = type(first).__name__
    return f"{name}: {text[0][:300]}" if text else name
