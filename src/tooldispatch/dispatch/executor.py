"""Run one attempt of a tool under its timer, which starts when the tool is invoked.

- ``async def`` tools run on the loop and are cancelled at the deadline.
- Sync tools run in a worker thread. Python cannot stop a thread, so a timed-out one is abandoned and
  recorded as possibly still running. The outcome comes back one of two ways: through the event loop
  (a future settled with ``call_soon_threadsafe``), or, when the caller's loop has nothing else to run
  (the sync API), to the dispatching thread waiting for the worker directly: a short spin that yields
  the CPU, then a lock acquired with the time left. Waking an event loop from another thread costs more
  than releasing a lock, and during the spin the waiting thread's CPU stays awake for a quick tool.
- Tools registered with ``isolation="process"`` run in a fresh child process (``spawn``). The child
  reports when it invokes the function, the deadline counts from then, and the child is killed when it
  passes. Results cross the process boundary as JSON text.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import multiprocessing
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from queue import SimpleQueue
from typing import Any

from tooldispatch.dispatch.registry import ToolDef
from tooldispatch.dispatch.text import escaped
from tooldispatch.errors import ToolError

PROCESS_START_TIMEOUT_S = 60.0
SPIN_S = 50e-6
"""How long a thread waiting on a sync tool polls for its outcome, yielding the CPU, before it sleeps."""

_yield_cpu: Callable[[], None] | None = getattr(os, "sched_yield", None)


class RemoteToolException(Exception):
    """An exception raised inside a child process, carried back by type name and message."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name


class ChildProcessDied(Exception):
    """A tool's child process ended without reporting a result."""


class InvalidResult(Exception):
    """A tool returned a value that is not JSON-serializable."""


def result_text(value: Any) -> str:
    """A tool's return value as the JSON text the model and the store get.

    Non-ASCII characters stay as they are; an unpaired UTF-16 surrogate, which no encoding can carry, is
    written as its JSON escape (``\\ud800``), which reads back as the same value.

    Raises:
        InvalidResult: the value is not JSON (a type JSON lacks, NaN or infinity, or nested too deeply).
    """
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidResult(f"{type(value).__name__} is not JSON-serializable ({shown(exc)})") from None
    except RecursionError:
        raise InvalidResult(f"{type(value).__name__} is nested too deeply to serialize") from None
    return escaped(text)


async def _contained(work: Awaitable[Any]) -> Any:
    """Await an async tool, turning any exception it raises that is not an ``Exception`` (``SystemExit``,
    ``KeyboardInterrupt``, its own ``CancelledError``, ...) into a tool failure.

    Raised inside a task, most of these would leave the event loop itself; a ``CancelledError`` the tool
    raises (rather than a cancellation of this task: its timeout or the caller's) would cancel the caller.
    """
    try:
        return await work
    except Exception:
        raise
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise
        raise RuntimeError(f"the tool raised CancelledError: {shown(exc)}") from None
    except BaseException as exc:
        raise RuntimeError(f"the tool raised {type(exc).__name__}: {shown(exc)}") from None


def shown(obj: object) -> str:
    """``str(obj)`` for a message; a placeholder when that fails, and unpaired surrogates escaped."""
    try:
        text = str(obj)
    except Exception:
        return f"<{type(obj).__name__} that cannot be shown as text>"
    return escaped(text)


@dataclass(frozen=True, slots=True)
class Attempt:
    """The outcome of one invocation.

    Attributes:
        value: what the tool returned (when it did not fail).
        error: the exception, if it failed.
        timed_out: it ran past its timeout.
        possibly_running: a timed-out sync tool whose thread could not be stopped.
        elapsed_s: seconds from invocation to outcome, on the dispatcher's clock.
    """

    value: Any = None
    error: BaseException | None = None
    timed_out: bool = False
    possibly_running: bool = False
    elapsed_s: float = 0.0


class _Expired(Exception):
    """Set on a sync tool's future when its deadline passes first."""


Outcome = tuple[bool, Any]
"""``(True, value)`` when a sync tool returned, ``(False, exception)`` when it raised."""

_Settle = Callable[[bool, Any], None]
_Job = tuple[_Settle, Callable[..., Any], tuple[Any, ...], dict[str, Any]]


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if not future.done():
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)


def _settle_threadsafe(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if not future.done():
        # A closed loop means nobody waits for this result any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle, future, ok, value)


def _expire(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_exception(_Expired())


class _Handoff:
    """One sync tool's outcome, passed from the worker thread to the thread that waits for it."""

    __slots__ = ("_done", "outcome")

    def __init__(self) -> None:
        self._done = threading.Lock()
        self._done.acquire()
        self.outcome: Outcome | None = None

    def settle(self, ok: bool, value: Any) -> None:
        self.outcome = (ok, value)
        self._done.release()

    def wait(self, deadline: float) -> Outcome | None:
        """The outcome, or None when ``deadline`` (``time.monotonic``) passes first."""
        done = self._done
        if _yield_cpu is not None:
            spin_until = min(time.monotonic() + SPIN_S, deadline)
            while time.monotonic() < spin_until:
                if done.acquire(False):
                    return self.outcome
                _yield_cpu()
        remaining = deadline - time.monotonic()
        if done.acquire(timeout=min(max(remaining, 0.0), threading.TIMEOUT_MAX)):
            return self.outcome
        return None


class WorkerThreads:
    """Threads that run sync tools, started on demand so a new call never queues behind a hung one.

    A thread whose tool hangs stays busy until the tool returns; another thread is started for the next
    call, up to ``max_workers`` threads (beyond that, calls wait for a free thread, and their timer runs).

    Args:
        max_workers: the most threads alive at once.
    """

    def __init__(self, max_workers: int = 256) -> None:
        self._jobs: SimpleQueue[_Job | None] = SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._threads = 0
        self._max = max_workers
        self._closed = False

    def submit(
        self, loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> asyncio.Future[Any]:
        """Run ``fn`` on a worker thread; the returned future (of ``loop``) settles with its outcome."""
        future: asyncio.Future[Any] = loop.create_future()
        self._start(functools.partial(_settle_threadsafe, loop, future), fn, args, kwargs)
        return future

    def call(self, deadline: float, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Outcome | None:
        """Run ``fn`` on a worker thread and wait for it on this thread until ``deadline``.

        Args:
            deadline: when to stop waiting, on the ``time.monotonic`` clock.
            fn: the function; ``args`` and ``kwargs`` are passed to it.

        Returns:
            The outcome, or None when the deadline passed first (the function may still be running).
        """
        handoff = _Handoff()
        self._start(handoff.settle, fn, args, kwargs)
        return handoff.wait(deadline)

    def _start(self, settle: _Settle, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
            elif self._threads < self._max:
                self._threads += 1
                threading.Thread(target=self._work, name="tooldispatch-tool", daemon=True).start()
        self._jobs.put((settle, fn, args, kwargs))

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            settle, fn, args, kwargs = job
            try:
                outcome: Outcome = (True, fn(*args, **kwargs))
            except Exception as exc:
                outcome = (False, exc)
            except BaseException as exc:  # SystemExit, KeyboardInterrupt inside a tool: a tool failure here
                outcome = (False, RuntimeError(f"the tool raised {type(exc).__name__}: {shown(exc)}"))
            # Counted idle before the outcome is handed over, so that a caller that goes straight on to
            # its next call finds this thread instead of starting another.
            with self._lock:
                leaving = self._closed
                if leaving:
                    self._threads -= 1
                else:
                    self._idle += 1
            settle(*outcome)
            del job, settle, outcome
            if leaving:
                return

    def close(self) -> None:
        """Let idle threads end; busy ones end when their tool returns."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, 0
            self._threads -= idle
        for _ in range(idle):
            self._jobs.put(None)


class Executor:
    """Runs tool attempts; owns the worker threads.

    Args:
        max_workers: the most worker threads for sync tools (abandoned timed-out calls keep theirs until
            they end).
        monotonic: the clock for ``elapsed_s``.
    """

    def __init__(self, *, max_workers: int = 256, monotonic: Callable[[], float] = time.perf_counter) -> None:
        self._workers = WorkerThreads(max_workers)
        self._monotonic = monotonic

    async def run(self, tool: ToolDef, args: dict[str, Any], *, exclusive: bool = False) -> Attempt:
        """Invoke ``tool`` once with ``args`` under ``tool.timeout_s``; never raises for tool failures.

        Args:
            tool: the tool.
            args: its validated arguments.
            exclusive: nothing else needs the running event loop until this attempt ends (a call made
                through the sync API), so a sync tool's outcome is waited for on this thread, blocking the
                loop, instead of being delivered through the loop. The timer and its outcome are the same.
        """
        if tool.isolation == "process":
            return await self._run_process(tool, args)
        start = self._monotonic()
        if tool.is_async:
            try:
                value = await asyncio.wait_for(_contained(tool.fn(**args)), tool.timeout_s)
            except TimeoutError:
                return Attempt(timed_out=True, elapsed_s=self._monotonic() - start)
            except Exception as exc:
                return Attempt(error=exc, elapsed_s=self._monotonic() - start)
            return Attempt(value=value, elapsed_s=self._monotonic() - start)
        if exclusive:
            outcome = self._workers.call(time.monotonic() + tool.timeout_s, tool.fn, **args)
            if outcome is None:
                return Attempt(timed_out=True, possibly_running=True, elapsed_s=self._monotonic() - start)
            ok, value = outcome
            if ok:
                return Attempt(value=value, elapsed_s=self._monotonic() - start)
            return Attempt(error=value, elapsed_s=self._monotonic() - start)
        loop = asyncio.get_running_loop()
        future = self._workers.submit(loop, tool.fn, **args)
        deadline = loop.call_later(tool.timeout_s, _expire, future)
        try:
            value = await future
        except _Expired:
            return Attempt(timed_out=True, possibly_running=True, elapsed_s=self._monotonic() - start)
        except Exception as exc:
            return Attempt(error=exc, elapsed_s=self._monotonic() - start)
        finally:
            deadline.cancel()
        return Attempt(value=value, elapsed_s=self._monotonic() - start)

    async def _run_process(self, tool: ToolDef, args: dict[str, Any]) -> Attempt:
        started: list[float] = []
        loop = asyncio.get_running_loop()

        def on_start() -> None:
            started.append(self._monotonic())

        outcome = await self._workers.submit(loop, _run_in_child, tool.fn, args, tool.timeout_s, on_start)
        begin = started[0] if started else self._monotonic()
        kind, payload = outcome
        elapsed = self._monotonic() - begin
        if kind == "timeout":
            return Attempt(timed_out=True, elapsed_s=elapsed)
        if kind == "ok":
            return Attempt(value=json.loads(payload), elapsed_s=elapsed)
        return Attempt(error=payload, elapsed_s=elapsed)

    def close(self) -> None:
        """Let idle worker threads end; running tools are not waited for."""
        self._workers.close()


def _run_in_child(
    fn: Callable[..., Any], args: dict[str, Any], timeout_s: float, on_start: Callable[[], None]
) -> tuple[str, Any]:
    """Start the child, wait for its start signal, then wait at most ``timeout_s`` for its result."""
    ctx = multiprocessing.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child_main, args=(sender, fn, args), daemon=True)
    proc.start()
    sender.close()
    try:
        if not receiver.poll(PROCESS_START_TIMEOUT_S):
            proc.kill()
            proc.join()
            return "error", ChildProcessDied(f"the tool's process did not start within {PROCESS_START_TIMEOUT_S:g} s")
        try:
            receiver.recv()
        except EOFError:
            proc.join()
            return "error", ChildProcessDied(f"the tool's process exited with code {proc.exitcode} before starting")
        on_start()
        if not receiver.poll(timeout_s):
            proc.kill()
            proc.join()
            return "timeout", None
        try:
            message = receiver.recv()
        except EOFError:
            proc.join()
            return "error", ChildProcessDied(f"the tool's process exited with code {proc.exitcode} mid-call")
    finally:
        receiver.close()
    proc.join()
    return _decode(message)


def _decode(message: tuple[Any, ...]) -> tuple[str, Any]:
    kind = message[0]
    if kind == "ok":
        return "ok", message[1]
    if kind == "invalid_result":
        return "error", InvalidResult(message[1])
    type_name, text, attrs = message[1], message[2], message[3]
    if type_name == "ToolError":
        return "error", ToolError(text, **attrs)
    if type_name == "ConnectionRefusedError":
        return "error", ConnectionRefusedError(text)
    if type_name == "gaierror":
        return "error", socket.gaierror(text)
    return "error", RemoteToolException(type_name, text)


def _child_main(sender: Connection, fn: Callable[..., Any], args: dict[str, Any]) -> None:
    """Entry point of the child process: signal the start, call the tool, send back JSON or the error."""
    sender.send(("start",))
    try:
        value = fn(**args)
    except BaseException as exc:
        attrs: dict[str, Any] = {}
        if isinstance(exc, ToolError):
            attrs = {
                "retryable": exc.retryable,
                "retry_after": exc.retry_after,
                "status": exc.status,
                "before_execution": exc.before_execution,
            }
        name = "ToolError" if isinstance(exc, ToolError) else type(exc).__name__
        sender.send(("error", name, shown(exc), attrs))
        return
    try:
        text = result_text(value)
    except InvalidResult as exc:
        sender.send(("invalid_result", str(exc)))
        return
    sender.send(("ok", text))
