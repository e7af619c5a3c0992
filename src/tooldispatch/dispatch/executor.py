"""Run one attempt of a tool under its timer, which starts when the tool is invoked.

- ``async def`` tools run on the loop, in the calling task, and are cancelled at the deadline.
- Sync tools run in a worker thread of their own tool's small pool, so a tool whose calls hang holds at
  most its own threads and never starves the others. Python cannot stop a thread, so a timed-out one is
  abandoned, recorded as possibly still running, and counted until it ends. A call that finds every
  thread of its tool busy waits for one (bounded; that wait is not run time) and, if none frees in time,
  is cancelled before it starts and refused as ``no_capacity``. The outcome comes back one of two ways:
  through the event loop (a future settled with ``call_soon_threadsafe``), or, when the caller's loop
  has nothing else to run (the sync API), to the dispatching thread waiting for the worker directly: a
  short spin that yields the CPU, then a lock acquired with the time left. Waking an event loop from
  another thread costs more than releasing a lock, and during the spin the waiting thread's CPU stays
  awake for a quick tool.
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
from tooldispatch.errors import ConfigError, ToolError

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


class NoCapacity(ToolError):
    """A sync call did not get a worker thread in time: it never started, so it is safe to try again."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=True, before_execution=True)


Outcome = tuple[bool, Any]
"""``(True, value)`` when a sync tool returned, ``(False, exception)`` when it raised."""

_Settle = Callable[[bool, Any], None]

_QUEUED, _RUNNING, _DONE, _CANCELLED = 0, 1, 2, 3
_now = time.perf_counter
"""The clock of queue waits and deadlines (monotonic)."""


class _Job:
    """One sync call handed to a pool: it moves from queued to running to done, or from queued to cancelled
    when nobody picked it up in time (then it never runs). Whichever of the worker (to start it) and the
    waiter (to cancel it) takes ``claim`` first decides which."""

    __slots__ = (
        "abandoned",
        "args",
        "claim",
        "fn",
        "kwargs",
        "queued_at",
        "settle",
        "started_at",
        "started_clock",
        "state",
    )

    def __init__(self, settle: _Settle, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.settle = settle
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.claim = threading.Lock()
        self.state = _QUEUED
        self.queued_at = _now()
        self.started_at = 0.0
        self.started_clock = 0.0
        self.abandoned = False


class _Verdict:
    """What a waiter does next: wait until ``until`` (``_now``), or give up as ``no_capacity`` or
    ``timeout``."""

    __slots__ = ("kind", "until")

    def __init__(self, kind: str, until: float = 0.0) -> None:
        self.kind = kind
        self.until = until


_NO_CAPACITY = _Verdict("no_capacity")
_TIMEOUT = _Verdict("timeout")


class _ThreadBudget:
    """The most worker threads alive at once, over every pool."""

    def __init__(self, limit: int) -> None:
        self._lock = threading.Lock()
        self.limit = limit
        self.alive = 0

    def take(self) -> bool:
        with self._lock:
            if self.alive >= self.limit:
                return False
            self.alive += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self.alive -= 1


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

    def wait(self, pool: WorkerThreads, job: _Job, wait_s: float, timeout_s: float) -> Outcome | _Verdict:
        """The outcome, or the verdict of ``pool`` on ``job`` (asked whenever the time it gave passes) that
        gave up."""
        done = self._done
        if _yield_cpu is not None:
            spin_until = _now() + SPIN_S
            while _now() < spin_until:
                if done.acquire(False):
                    assert self.outcome is not None
                    return self.outcome
                _yield_cpu()
        while True:
            verdict = pool.check(job, wait_s, timeout_s)
            if verdict.kind != "wait":
                # The outcome may have come between the last wait and the verdict; the verdict stands, as the
                # pool already recorded it (the call was cancelled before starting, or abandoned).
                return verdict
            remaining = verdict.until - _now()
            if done.acquire(timeout=min(max(remaining, 0.0), threading.TIMEOUT_MAX)):
                assert self.outcome is not None
                return self.outcome


class WorkerThreads:
    """The threads that run one tool's sync calls, started on demand so a new call never queues behind a hung one.

    A thread whose call hangs stays busy until the call returns; another thread is started for the next
    call, up to ``max_workers`` threads for this pool (and as long as ``budget`` allows, over all pools). A
    call that finds every thread busy waits for one, up to its own wait limit; it starts only if a thread
    picks it up in time, and otherwise is cancelled, never to run. Its timer starts when a thread invokes it.

    Args:
        max_workers: the most threads of this pool.
        budget: the limit on threads over every pool (a private one when omitted).
        clock: the clock that stamps when a call starts, for its elapsed time (``None``: ``time.perf_counter``).
    """

    def __init__(
        self,
        max_workers: int = 256,
        *,
        budget: _ThreadBudget | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self._jobs: SimpleQueue[_Job | None] = SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._backlog = 0
        self._threads = 0
        self._max = max_workers
        self._budget = budget if budget is not None else _ThreadBudget(max_workers)
        self._clock = clock
        self._closed = False
        self.abandoned = 0
        """Calls given up at their timeout whose thread is still running them."""

    @property
    def size(self) -> int:
        """The most threads of this pool."""
        return self._max

    @property
    def threads(self) -> int:
        """The threads this pool has now."""
        return self._threads

    def submit(
        self,
        loop: asyncio.AbstractEventLoop,
        wait_s: float,
        timeout_s: float | None,
        fn: Callable[..., Any],
        /,
        *args: Any,
        **kwargs: Any,
    ) -> tuple[asyncio.Future[Any], _Job]:
        """Run ``fn`` on a worker thread; the future (of ``loop``) settles with its outcome, or fails with
        ``_Expired`` once it has run ``timeout_s`` (``None``: never), or with ``NoCapacity`` when no thread
        started it within ``wait_s``."""
        future: asyncio.Future[Any] = loop.create_future()
        job = _Job(functools.partial(_settle_threadsafe, loop, future), fn, args, kwargs)
        self._start(job)

        def on_check() -> None:
            if future.done():
                return
            verdict = self.check(job, wait_s, timeout_s)
            if verdict.kind == "wait":
                loop.call_at(loop.time() + max(verdict.until - _now(), 0.0), on_check)
            elif verdict.kind == "no_capacity":
                future.set_exception(NoCapacity(""))
            else:
                future.set_exception(_Expired())

        first = wait_s if timeout_s is None else min(wait_s, timeout_s)
        handle = loop.call_later(first, on_check)
        future.add_done_callback(lambda _: handle.cancel())
        return future, job

    def call(
        self, wait_s: float, timeout_s: float, fn: Callable[..., Any], /, *args: Any, **kwargs: Any
    ) -> tuple[Outcome | _Verdict, _Job]:
        """Run ``fn`` on a worker thread and wait for it on this thread.

        Args:
            wait_s: the most seconds to wait for a thread to start it.
            timeout_s: the most seconds it may run once started.
            fn: the function; ``args`` and ``kwargs`` are passed to it.

        Returns:
            The outcome, or the verdict that gave up (``no_capacity``: it never started; ``timeout``: it may
            still be running), and the job (for its start time).
        """
        handoff = _Handoff()
        job = _Job(handoff.settle, fn, args, kwargs)
        self._start(job)
        return handoff.wait(self, job, wait_s, timeout_s), job

    def check(self, job: _Job, wait_s: float, timeout_s: float | None) -> _Verdict:
        """Decide, under the lock, whether a waiter goes on waiting; cancels a job that waited too long to
        start, and counts a timed-out running one as abandoned."""
        now = _now()
        with self._lock:
            if job.state == _QUEUED:
                if now < job.queued_at + wait_s:
                    return _Verdict("wait", job.queued_at + wait_s)
                if job.claim.acquire(False):
                    job.state = _CANCELLED
                    return _NO_CAPACITY
                return _Verdict("wait", now + 0.001)  # a worker is starting it this moment
            if job.state == _RUNNING and timeout_s is not None:
                if now >= job.started_at + timeout_s:
                    job.abandoned = True
                    self.abandoned += 1
                    return _TIMEOUT
                return _Verdict("wait", job.started_at + timeout_s)
            return _Verdict("wait", now + 0.001)  # done: the outcome is on its way

    def _start(self, job: _Job) -> None:
        # Each queued job has a thread on its way (an idle one, or a new one) or adds to the backlog, which
        # the next thread to finish its call takes up.
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
                start = False
            else:
                start = self._threads < self._max and self._budget.take()
                if start:
                    self._threads += 1
                else:
                    self._backlog += 1
        if start:
            threading.Thread(target=self._work, name="tooldispatch-tool", daemon=True).start()
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                self._budget.give_back()
                return
            if not job.claim.acquire(False):  # cancelled: it waited too long and will never run
                with self._lock:
                    self._free()
                continue
            now = _now()
            job.started_at = now
            job.started_clock = now if self._clock is None else self._clock()
            job.state = _RUNNING
            try:
                outcome: Outcome = (True, job.fn(*job.args, **job.kwargs))
            except Exception as exc:
                outcome = (False, exc)
            except BaseException as exc:  # SystemExit, KeyboardInterrupt inside a tool: a tool failure here
                outcome = (False, RuntimeError(f"the tool raised {type(exc).__name__}: {shown(exc)}"))
            # Counted idle before the outcome is handed over, so that a caller that goes straight on to
            # its next call finds this thread instead of starting another.
            with self._lock:
                job.state = _DONE
                if job.abandoned:
                    self.abandoned -= 1
                leaving = self._closed
                if leaving:
                    self._threads -= 1
                else:
                    self._free()
            job.settle(*outcome)
            del job, outcome
            if leaving:
                self._budget.give_back()
                return

    def _free(self) -> None:
        """This thread is free (under the lock): it takes up the backlog, or waits idle."""
        if self._backlog > 0:
            self._backlog -= 1
        else:
            self._idle += 1

    def close(self) -> None:
        """Let idle threads end; busy ones end when their tool returns."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, 0
            self._threads -= idle
        for _ in range(idle):
            self._jobs.put(None)


class Executor:
    """Runs tool attempts; owns the worker threads, one small pool per tool.

    Args:
        max_workers: the most worker threads for sync tools, over every tool (abandoned timed-out calls keep
            theirs until they end).
        tool_workers: the most worker threads one tool may hold, so that a tool whose calls hang cannot
            starve the others.
        capacity_wait_s: the most seconds a sync call waits for a free worker of its tool before it is
            refused as ``no_capacity`` (never started); ``None``: the tool's own ``timeout_s``.
        monotonic: the clock for ``elapsed_s``.
    """

    def __init__(
        self,
        *,
        max_workers: int = 256,
        tool_workers: int = 8,
        capacity_wait_s: float | None = None,
        monotonic: Callable[[], float] = time.perf_counter,
    ) -> None:
        if max_workers < 1 or tool_workers < 1 or (capacity_wait_s is not None and capacity_wait_s < 0):
            raise ConfigError("max_workers and tool_workers must be at least 1, capacity_wait_s at least 0")
        self._budget = _ThreadBudget(max_workers)
        self._tool_workers = tool_workers
        self._capacity_wait_s = capacity_wait_s
        self._pools: dict[str, WorkerThreads] = {}
        self._pools_lock = threading.Lock()
        self._monotonic = monotonic

    def capacity_wait_s(self, tool: ToolDef) -> float:
        """How long a sync call of ``tool`` may wait for a worker."""
        return tool.timeout_s if self._capacity_wait_s is None else self._capacity_wait_s

    def _pool(self, tool: ToolDef) -> WorkerThreads:
        pool = self._pools.get(tool.name)
        if pool is None:
            with self._pools_lock:
                pool = self._pools.get(tool.name)
                if pool is None:
                    clock = None if self._monotonic is time.perf_counter else self._monotonic
                    pool = WorkerThreads(self._tool_workers, budget=self._budget, clock=clock)
                    self._pools[tool.name] = pool
        return pool

    def abandoned(self) -> dict[str, int]:
        """Per tool, calls given up at their timeout whose worker thread is still running them."""
        return {name: pool.abandoned for name, pool in list(self._pools.items()) if pool.abandoned}

    def _no_capacity(self, tool: ToolDef, pool: WorkerThreads) -> Attempt:
        hung = pool.abandoned
        still = f" ({hung} of its calls are still running after their timeout)" if hung else ""
        wait = f"{self.capacity_wait_s(tool):g} s"
        if pool.threads >= pool.size:
            why = f"all {pool.size} of its workers were busy for {wait}{still}"
        else:
            why = (
                f"no worker was free for {wait}: the dispatcher's {self._budget.limit} worker threads are all in "
                f"use{still}"
            )
        return Attempt(error=NoCapacity(f"{tool.name} did not start: {why}; it was not run"))

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
        if tool.is_async:
            start = self._monotonic()
            try:
                # In the caller's task, not a task of its own as ``wait_for`` would start: two loop turns fewer,
                # and the caller resumes as soon as the tool returns, before whatever else the loop has ready.
                async with asyncio.timeout(tool.timeout_s):
                    value = await _contained(tool.fn(**args))
            except TimeoutError:
                return Attempt(timed_out=True, elapsed_s=self._monotonic() - start)
            except Exception as exc:
                return Attempt(error=exc, elapsed_s=self._monotonic() - start)
            return Attempt(value=value, elapsed_s=self._monotonic() - start)
        pool = self._pools.get(tool.name) or self._pool(tool)
        wait_s = tool.timeout_s if self._capacity_wait_s is None else self._capacity_wait_s
        if exclusive:
            outcome, job = pool.call(wait_s, tool.timeout_s, tool.fn, **args)
            if isinstance(outcome, _Verdict):
                if outcome.kind == "no_capacity":
                    return self._no_capacity(tool, pool)
                elapsed = self._monotonic() - job.started_clock
                return Attempt(timed_out=True, possibly_running=True, elapsed_s=elapsed)
            ok, value = outcome
            elapsed = self._monotonic() - job.started_clock
            return Attempt(value=value, elapsed_s=elapsed) if ok else Attempt(error=value, elapsed_s=elapsed)
        future, job = pool.submit(asyncio.get_running_loop(), wait_s, tool.timeout_s, tool.fn, **args)
        try:
            value = await future
        except _Expired:
            elapsed = self._monotonic() - job.started_clock
            return Attempt(timed_out=True, possibly_running=True, elapsed_s=elapsed)
        except NoCapacity:
            return self._no_capacity(tool, pool)
        except Exception as exc:
            return Attempt(error=exc, elapsed_s=self._monotonic() - job.started_clock)
        return Attempt(value=value, elapsed_s=self._monotonic() - job.started_clock)

    async def _run_process(self, tool: ToolDef, args: dict[str, Any]) -> Attempt:
        started: list[float] = []
        loop = asyncio.get_running_loop()

        def on_start() -> None:
            started.append(self._monotonic())

        pool = self._pool(tool)
        # The thread bounds its own wait for the child (start, then the tool's timeout), so only the wait for
        # a worker is bounded here.
        future, _ = pool.submit(
            loop, self.capacity_wait_s(tool), None, _run_in_child, tool.fn, args, tool.timeout_s, on_start
        )
        try:
            outcome = await future
        except NoCapacity:
            return self._no_capacity(tool, pool)
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
        with self._pools_lock:
            pools = list(self._pools.values())
        for pool in pools:
            pool.close()


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
