"""uvicorn's HTTP/1.1 protocol with a bound on how long a client may take to send its request's head.

uvicorn drops a kept-alive connection that stays idle (``timeout_keep_alive``), but a client that has opened a
connection, or begun a request, and then sends its headers a byte at a time holds the connection, and a
server slot, for as long as it likes. ``with_head_timeout`` gives the protocol a timer that starts when the
connection opens or a request's first byte arrives and stops when the request's headers are complete; if it
runs out, the client gets a 408 and the connection is closed, with one warning in the log. The body of a
request is bounded by the application (``Proxy.client_timeout_s``), from its first read to its last.

The connection is closed the way HTTP servers close one whose client may still be sending (a "lingering close"):
the server sends what it wrote and its end of the stream, then reads and drops what still arrives, for at most
``LINGER_S`` or until the client closes too. Closing at once while the client's bytes are still arriving makes
the kernel answer them with a reset, and a reset can discard the answer (a 408, say) before the client reads it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

_log = logging.getLogger("tooldispatch.proxy")
LINGER_S = 2.0
_SAID = b"the request headers did not arrive in time; send them whole, promptly\n"
_TIMED_OUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
    b"content-length: %d\r\n\r\n%s" % (len(_SAID), _SAID)
)


class _LingeringTransport:
    """A connection's transport whose ``close`` is a lingering close; everything else is the transport's own."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self.lingering = False
        self.linger_s = LINGER_S

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def is_closing(self) -> bool:
        return self.lingering or self._transport.is_closing()

    def close(self) -> None:
        """Send the end of the stream and close after ``linger_s``; the client's own close ends it sooner."""
        if self.lingering:
            if self.linger_s <= 0:
                self._transport.close()
            return
        if self._transport.is_closing():
            return
        if self.linger_s <= 0 or not self._transport.can_write_eof():
            self._transport.close()
            return
        self.lingering = True
        self._transport.write_eof()
        self._loop.call_later(self.linger_s, self._transport.close)


class _HeadTimeoutProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` that closes a connection whose request head does not arrive within ``head_timeout_s``."""

    head_timeout_s = 60.0
    _head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._lingering = _LingeringTransport(transport, self.loop)
        super().connection_made(self._lingering)  # type: ignore[arg-type]
        self._arm()

    def data_received(self, data: bytes) -> None:
        if not self._lingering.lingering:  # after the answer and the close, what still arrives is dropped
            super().data_received(data)

    def shutdown(self) -> None:
        self._lingering.linger_s = 0  # the server is stopping: close at once
        super().shutdown()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_timed_out)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing():
            return
        where = "%s:%d" % self.client if self.client else "a client"  # noqa: UP031  # uvicorn's own form
        _log.warning(
            "dropped the connection of %s: its request headers did not arrive within %g s (--client-timeout)",
            where,
            self.head_timeout_s,
        )
        self.transport.write(_TIMED_OUT)
        self.transport.close()


def with_head_timeout(seconds: float) -> type[Any]:
    """The protocol class to give uvicorn (``http=``) that bounds a request head's arrival by ``seconds``."""
    return type("HeadTimeoutProtocol", (_HeadTimeoutProtocol,), {"head_timeout_s": seconds})
