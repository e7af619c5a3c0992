"""The HTTP client of an OpenAI-compatible upstream: kept-alive HTTP/1.1 connections, framed by ``httptools``.

One ``HttpPool`` per upstream, owned by its ``OpenAICompatBackend``: the backend's turns and the proxy's
forwarded requests go through it alike. It does one thing: a ``POST`` written in one piece, its answer's
status and headers, then the body as it arrives (as pieces, or as text lines for SSE), and the connection put
back for the next request once its answer was read whole. ``httptools`` (llhttp, the parser of Node.js and of
uvicorn) reads the status line, the headers and the body's framing (``Content-Length``, chunked transfer
coding, or the end of the connection); ``https://`` upstreams are the same exchange over the event loop's TLS.

Why not ``httpx2`` or the ``openai`` SDK: measured in ``tooldispatch bench proxy``'s setting, either costs
more CPU per request than the proxy's whole latency budget (≤ 1 ms added); an exchange on a kept-alive socket
costs a tenth of it.

Each connection is one ``asyncio.Protocol`` (``_Conn``) that feeds what arrives to its parser, which appends
the body's pieces to a list: everything that has already arrived (a burst of SSE chunks) is taken without
waiting, and the client waits (with the read timeout) only when nothing is left: one wait per arrival from the
network, not one per chunk.

Failures are ``UpstreamError`` (cannot connect, connection dropped, malformed answer) and its subclass
``UpstreamTimeout``; the backend turns them into the project's errors (``wire_errors``).
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import cast
from urllib.parse import urlsplit

import httptools

_HIGH_WATER = 1024 * 1024  # bytes buffered before reading pauses (a client slower than its upstream)
_NO_BODY = frozenset({204, 304})
DRAIN_S = 1.0
"""How long the rest of a stream is read after ``[DONE]`` (normally only the body's last chunk, already on its
way), so that its connection can take the next request; an upstream slower than that gets the connection closed
(nothing of the answer is lost: ``[DONE]`` has arrived)."""


class UpstreamError(Exception):
    """The exchange with the upstream failed below HTTP (connect, read, framing)."""


class UpstreamTimeout(UpstreamError):
    """The upstream did not connect or send more of its answer within the timeout."""


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class _Conn(asyncio.Protocol):
    """One connection: the answer being read (status, headers, body pieces not taken yet) and its state."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.ended = False  # the upstream closed its side, or the connection broke
        self.broken: BaseException | None = None
        self.stray = False  # bytes arrived outside an answer: the connection cannot be reused
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False
        self._parser: httptools.HttpResponseParser | None = None
        self.begin()

    def begin(self) -> None:
        """Get ready for the answer to a new request."""
        self._parser = httptools.HttpResponseParser(self)
        self.status = 0
        self.headers: dict[str, str] = {}
        self.head_done = False
        self.complete = False
        self.keep_alive = False
        self._by_eof = False
        self.pieces: list[bytes] = []
        self.buffered = 0

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's

    def data_received(self, data: bytes) -> None:
        if self._parser is None or self.complete:
            self.stray = True
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.broken = UpstreamError(f"the upstream's answer is not valid HTTP/1.1 ({exc})")
            self.ended = True
            self.close()
        if self.buffered > _HIGH_WATER and self.transport is not None and not self._paused:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._end()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if exc is not None and self.broken is None:
            self.broken = exc
        self._end()

    def _end(self) -> None:
        self.ended = True
        if self.head_done and self._by_eof:  # a body framed by the end of the connection is whole now
            self.complete = True
        self._wake()

    # httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        assert self._parser is not None
        self.status = self._parser.get_status_code()
        self.keep_alive = self._parser.should_keep_alive()
        self.head_done = True
        chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        self._by_eof = not chunked and "content-length" not in self.headers and self.status not in _NO_BODY

    def on_body(self, body: bytes) -> None:
        self.pieces.append(bytes(body))
        self.buffered += len(body)

    def on_message_complete(self) -> None:
        self.complete = True

    # the reading side

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def take(self) -> bytes:
        """Every body piece that has arrived and not been taken, joined."""
        pieces, self.pieces = self.pieces, []
        self.buffered = 0
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    async def more(self, timeout_s: float | None) -> None:
        """Wait until more arrives.

        Raises:
            UpstreamError: the connection ended first (or the answer was not HTTP).
            UpstreamTimeout: nothing arrived within ``timeout_s``.
        """
        if self.ended:
            if isinstance(self.broken, UpstreamError):
                raise self.broken
            why = f" ({type(self.broken).__name__})" if self.broken is not None else ""
            raise UpstreamError(f"the upstream closed the connection before the whole answer arrived{why}")
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(timeout_s, _expire, waiter) if timeout_s is not None else None
        try:
            await waiter
        except TimeoutError as exc:
            raise UpstreamTimeout(f"no answer within {timeout_s:g} s") from exc
        finally:
            if timer is not None:
                timer.cancel()
            self._waiter = None

    def reusable(self) -> bool:
        """The last answer was read whole, the upstream keeps the connection open, and nothing else arrived."""
        return (
            self.complete
            and self.keep_alive
            and not self.ended
            and not self.stray
            and not self.pieces
            and self.transport is not None
            and not self.transport.is_closing()
        )

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class Reply:
    """One answer: status and headers read; the body read on demand, once.

    Attributes:
        status: the HTTP status.
        headers: the headers, names in lower case.
    """

    def __init__(self, pool: HttpPool, conn: _Conn) -> None:
        self.status = conn.status
        self.headers = conn.headers
        self._pool = pool
        self._conn: _Conn | None = conn
        self._rest = b""  # the start of a line not yet ended (``lines``)

    async def piece(self) -> bytes:
        """The next part of the body: everything that has arrived and is not read yet, waiting only when nothing
        has; ``b""`` once the body is complete.

        Raises:
            UpstreamError: the connection broke or the framing is malformed.
            UpstreamTimeout: nothing arrived within the pool's read timeout.
        """
        conn = self._conn
        if conn is None:
            return b""
        while not conn.pieces:
            if conn.complete:
                return b""
            await conn.more(self._pool.timeout_s)
        return conn.take()

    async def read(self) -> bytes:
        """The whole body."""
        try:
            parts: list[bytes] = []
            while piece := await self.piece():
                parts.append(piece)
            return b"".join(parts)
        finally:
            await self.close()

    async def lines(self) -> AsyncIterator[str]:
        """The body as text lines, without their line ends (for SSE); everything that has arrived is split at once."""
        while piece := await self.piece():
            *complete, self._rest = (self._rest + piece).split(b"\n")
            for line in complete:
                yield line.rstrip(b"\r").decode("utf-8", "replace")
        if self._rest:
            rest, self._rest = self._rest, b""
            yield rest.rstrip(b"\r").decode("utf-8", "replace")

    async def drain(self) -> None:
        """Read what is left of the body (after ``[DONE]``: normally only the last chunk, already on its way), for at
        most the pool's ``drain_s``, so the connection can be reused; on any failure it is simply not reused."""
        try:
            async with asyncio.timeout(self._pool.drain_s):
                while await self.piece():
                    pass
        except (TimeoutError, UpstreamError):
            pass

    async def close(self) -> None:
        """Give the connection back when the answer was read whole and may be reused; close it otherwise."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if conn.reusable():
            self._pool.idle.append(conn)
        else:
            conn.close()


class HttpPool:
    """Kept-alive HTTP/1.1 connections to one upstream (``http://`` or ``https://``).

    Args:
        base_url: the upstream's API root (``http://127.0.0.1:8000/v1``).
        timeout_s: the limit for each wait for more of the answer (``None``: the caller bounds the time);
            connecting takes at most ``min(10, timeout_s)`` seconds.
        headers: headers sent with every request (the upstream's key).
        drain_s: how long the rest of a stream is read after ``[DONE]`` (``DRAIN_S``).
        tls: the TLS settings for ``https://`` (default: the system's trusted certificates, host name checked).
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float | None,
        headers: Mapping[str, str] | None = None,
        drain_s: float = DRAIN_S,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        url = urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"{base_url!r} is not an http:// or https:// URL")
        self.host = url.hostname
        self.tls = url.scheme == "https"
        self.port = url.port or (443 if self.tls else 80)
        self._prefix = url.path.rstrip("/").encode("latin-1")
        self.timeout_s = timeout_s
        self.drain_s = drain_s
        lines = [f"Host: {url.netloc}", "Accept: */*", "Content-Type: application/json"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items() if k.lower() not in ("host", "content-type")]
        self._head = "\r\n".join(lines).encode("latin-1")
        self.idle: list[_Conn] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ssl = tls

    async def _connect(self) -> _Conn:
        limit = min(10.0, self.timeout_s or 10.0)
        if self.tls and self._ssl is None:
            self._ssl = ssl.create_default_context()
        try:
            async with asyncio.timeout(limit):
                _, conn = await asyncio.get_running_loop().create_connection(
                    _Conn, self.host, self.port, ssl=self._ssl if self.tls else None
                )
        except TimeoutError as exc:
            raise UpstreamTimeout(f"could not connect within {limit:g} s") from exc
        except OSError as exc:  # ssl.SSLError included
            raise UpstreamError(f"cannot connect ({type(exc).__name__}: {exc.strerror or exc})") from exc
        return conn

    def _idle_conn(self) -> _Conn | None:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # connections belong to the loop that opened them (asyncio.run once per turn)
            self.idle, self._loop = [], loop
        while self.idle:
            conn = self.idle.pop()
            if conn.reusable():
                return conn
            conn.close()
        return None

    async def post(self, path: str, body: bytes) -> Reply:
        """Send ``POST {prefix}{path}`` with a JSON ``body`` and read the status line and headers of the answer.

        Raises:
            UpstreamError: the upstream cannot be reached or its answer is not HTTP/1.x.
            UpstreamTimeout: it did not connect or answer in time.
        """
        return await self.send(b"POST", path, body)

    async def send(self, method: bytes, path: str, body: bytes = b"") -> Reply:
        """Send ``{method} {prefix}{path}`` (``GET /models``, ``POST /chat/completions``); as ``post``."""
        request = b"%s %s%s HTTP/1.1\r\n%s\r\nContent-Length: %d\r\n\r\n%s" % (
            method,
            self._prefix,
            path.encode("latin-1"),
            self._head,
            len(body),
            body,
        )
        while True:
            conn = self._idle_conn()
            reused = conn is not None
            if conn is None:
                conn = await self._connect()
            conn.begin()
            assert conn.transport is not None
            conn.transport.write(request)
            try:
                while not conn.head_done:
                    await conn.more(self.timeout_s)
                return Reply(self, conn)
            except UpstreamTimeout:
                conn.close()
                raise
            except UpstreamError as exc:
                conn.close()
                if reused and conn.status == 0 and not isinstance(conn.broken, UpstreamError):
                    continue  # the upstream had closed the kept-alive connection: a new one, as clients do
                raise UpstreamError(f"the connection broke before the answer ({exc})") from exc

    async def aclose(self) -> None:
        """Close every idle connection."""
        idle, self.idle = self.idle, []
        for conn in idle:
            conn.close()
