"""The supervisor: one background thread whose event loop owns every MCP connection of a process.

Tools are called from any thread or event loop (the sync ``Dispatcher.dispatch``, an agent's loop, the
gateway's server loop); each call hops onto this loop, so a connection's streams and its server's process
are only ever touched from one place. ``close()`` (also run at interpreter exit) stops every server and
waits until each child is reaped.
"""

from __future__ import annotations

import asyncio
import atexit
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")


class Supervisor:
    """A background event loop for MCP connections."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="tooldispatch-mcp", daemon=True)
        self._thread.start()
        self._closers: list[Any] = []
        self._closed = False
        atexit.register(self.close)

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Schedule a coroutine on the supervisor's loop."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run a coroutine on the supervisor's loop and wait for its result (from another thread)."""
        return self.submit(coro).result(timeout_s)

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await a coroutine run on the supervisor's loop; cancelling cancels it. On that loop already, no hop."""
        if asyncio.get_running_loop() is self.loop:
            return await coro
        return await asyncio.wrap_future(self.submit(coro))

    def on_close(self, stop: Any) -> None:
        """Register a coroutine function run on the loop when the supervisor closes (servers' ``stop``)."""
        self._closers.append(stop)

    def close(self) -> None:
        """Stop every server, then the loop and its thread. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)

        async def stop_all() -> None:
            await asyncio.gather(*(stop() for stop in self._closers), return_exceptions=True)

        if self.loop.is_running():
            try:
                self.run(stop_all(), timeout_s=30.0)
            finally:
                self.loop.call_soon_threadsafe(self.loop.stop)
                self._thread.join(10.0)
        if not self.loop.is_running():
            self.loop.close()
