"""The dispatcher: one call from the model to the tool and back, safely.

Pipeline for each call (one async implementation; ``dispatch`` is a thin sync wrapper that runs it on the
calling thread's own event loop, where a sync tool's outcome is waited for directly instead of through the
loop, see ``executor``):

1. name admission: an unknown tool is rejected as ``tool_hallucination`` with the nearest names;
2. validation (null optionals dropped, strict requireds), rejected as ``validation``; a call the parser validated
   against the tool's schema, and whose arguments are unchanged since (``ToolCall.checked``), is not validated again;
3. idempotency lookup (side-effecting tools): replay, ``idempotency_conflict`` or ``idempotency_mismatch``;
4. resource admission: quota (``quota_exceeded``), fresh state (``stale_state_must_refresh``), approval
   (``awaiting_approval``, persisted, resumed by ``approve``);
5. the in-flight idempotency record is committed, and the quota counted, just before invocation;
6. execution under the tool's timer (started at invocation), with retries as ``retry.decide`` allows;
7. the result is serialized to JSON, bounded for the model, stored in full, and traced;
8. a successful side-effecting call ends the stored results and pending compensations of earlier calls, in any
   session, that acted on the same thing (``saga.resource_of``; listed in the trace's ``extra["supersedes"]``):
   an effect undone or replaced is run again, not replayed, and never compensated twice.

Compensations (``rollback`` and a failure in a saga) skip resource admission: undoing must not be
blocked by a quota, stale state or an approval queue.

The steps are ``pipeline.Pipeline``'s; this module holds the public API, and the event loops that the sync
wrappers run it on.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from tooldispatch.dispatch.call import CallInput, StopCheck, call_parts
from tooldispatch.dispatch.clock import Clock, SystemClock
from tooldispatch.dispatch.executor import Executor
from tooldispatch.dispatch.idempotency import IdempotencyStore
from tooldispatch.dispatch.metrics import MetricsReport, report
from tooldispatch.dispatch.pipeline import Pipeline
from tooldispatch.dispatch.registry import Registry
from tooldispatch.dispatch.result import DispatchResult
from tooldispatch.dispatch.saga import SagaEntry, SagaJournal
from tooldispatch.dispatch.state import PendingApproval, State
from tooldispatch.dispatch.trace import DispatchTrace
from tooldispatch.errors import ConfigError
from tooldispatch.store import StateStore, open_store
from tooldispatch.types import Checked

T = TypeVar("T")


class Dispatcher:
    """Runs tool calls from a model against a ``Registry``, with state in a store (SQLite or PostgreSQL).

    Args:
        registry: the tools.
        store: a SQLite file path, ``":memory:"``, a ``postgresql://`` URL shared with other workers, or an
            open store (``open_store``).
        clock: time source (tests pass a ``ManualClock``).
        sleep: how retries wait (default ``asyncio.sleep``).
        rand: uniform [0, 1) source for retry jitter.
        compensate_on_failure: run the session's pending compensations when a side-effecting call fails
            during execution (the saga aborts).
        max_workers: the most worker threads for sync tools, over every tool.
        tool_workers: the most worker threads one tool holds (its own small pool), so that a tool whose
            calls hang cannot starve the others.
        capacity_wait_s: the most seconds a sync call waits for a free worker of its tool; past it, the call
            is refused as ``no_capacity`` without having started (retryable). ``None``: the tool's timeout.
        tool_loop: the running event loop, owned by another thread, that the registry's async tools live on (an
            MCP supervisor's, ``ToolSources.tool_loop``). The sync API then runs each call on it, one hop from
            the calling thread and back, instead of on the thread's own loop with a hop per tool call.

    Attributes:
        warnings: registry warnings plus descriptions changed under the same version.

    Raises:
        RegistrationError: tools reference missing compensations or refreshers.
        ConfigError: the store cannot be opened, or its URL names a database this build does not serve.
    """

    def __init__(
        self,
        registry: Registry,
        store: str | Path | StateStore = ":memory:",
        *,
        clock: Clock | None = None,
        sleep: Callable[[float], Awaitable[None]] | None = None,
        rand: Callable[[], float] = random.random,
        compensate_on_failure: bool = True,
        max_workers: int = 256,
        tool_workers: int = 8,
        capacity_wait_s: float | None = None,
        tool_loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        registry.check()
        self.registry = registry
        self.store = open_store(store)
        self.clock: Clock = clock or SystemClock()
        self._state = State(self.store)
        weakref.finalize(self, self._state.flush)
        self._idem = IdempotencyStore(self.store)
        self._saga = SagaJournal(self.store)
        self._executor = Executor(
            max_workers=max_workers,
            tool_workers=tool_workers,
            capacity_wait_s=capacity_wait_s,
            # SystemClock.monotonic is time.perf_counter: passed as itself, workers stamp starts without a call.
            monotonic=time.perf_counter if type(self.clock) is SystemClock else self.clock.monotonic,
        )
        self._tool_loop = tool_loop
        self._local = threading.local()
        self._loops: list[asyncio.AbstractEventLoop] = []
        self._loops_lock = threading.Lock()
        self._pipeline = Pipeline(
            registry,
            state=self._state,
            idem=self._idem,
            saga=self._saga,
            executor=self._executor,
            clock=self.clock,
            sleep=sleep or asyncio.sleep,
            rand=rand,
            compensate_on_failure=compensate_on_failure,
            exclusive=self._in_sync_call,
        )
        now = self.clock.time()
        self._idem.purge(now)
        self.warnings: list[str] = list(registry.warnings)
        for tool in registry:
            change = self._state.pin_description(tool, now)
            if change:
                self.warnings.append(change)

    # ------------------------------------------------------------------ public API

    @property
    def compensate_on_failure(self) -> bool:
        """Whether a side-effecting call that fails during execution runs the session's pending compensations."""
        return self._pipeline.compensate_on_failure

    @compensate_on_failure.setter
    def compensate_on_failure(self, value: bool) -> None:
        self._pipeline.compensate_on_failure = value

    def __enter__(self) -> Dispatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def dispatch(
        self,
        name: str,
        args: Any = None,
        *,
        session_id: str = "default",
        trigger: str = "model",
        call_id: str | None = None,
        model_latency_s: float | None = None,
        reasoning_s: float | None = None,
        repairs: Sequence[Any] = (),
        checked: Checked | None = None,
    ) -> DispatchResult:
        """Run one call synchronously; same arguments and semantics as ``adispatch``.

        Works from any thread without a running event loop (each thread gets its own loop). A sync tool still
        runs in a worker thread under its timer; this thread waits for it directly, which costs less than
        having the worker wake the loop.

        Raises:
            ConfigError: called from inside a running event loop (use ``await adispatch(...)`` there).
        """
        return self._run_sync(
            self.adispatch(
                name,
                args,
                session_id=session_id,
                trigger=trigger,
                call_id=call_id,
                model_latency_s=model_latency_s,
                reasoning_s=reasoning_s,
                repairs=repairs,
                checked=checked,
            )
        )

    async def adispatch(
        self,
        name: str,
        args: Any = None,
        *,
        session_id: str = "default",
        trigger: str = "model",
        call_id: str | None = None,
        model_latency_s: float | None = None,
        reasoning_s: float | None = None,
        repairs: Sequence[Any] = (),
        checked: Checked | None = None,
    ) -> DispatchResult:
        """Run one call: admission, validation, idempotency, execution under the tool's timer, retries,
        bounding, tracing.

        Args:
            name: the tool name the model used.
            args: the arguments (a dict, or a JSON object as text).
            session_id: the session: scope of quotas, freshness, idempotency keys and the saga.
            trigger: what caused the call (``model``, ``user``, ...), recorded in the trace.
            call_id: the model's tool-call id, recorded and used in the tool message.
            model_latency_s: time the model took for the turn, for the trace.
            reasoning_s: time spent reasoning, for the trace.
            repairs: repairs the parser made to this call, for the trace.
            checked: the parser's stamp of the call (``ToolCall.checked``): arguments it still vouches for
                against this tool's schema are not validated again. Without it the arguments are validated.

        Returns:
            The result; tool failures never raise, they come back as ``status="error"`` with a
            model-visible JSON envelope in ``content``.
        """
        call = self._pipeline.new_call(name, args, session_id, trigger, call_id)
        call.repairs.extend(repairs)
        call.checked = checked
        if model_latency_s is not None:
            call.latencies["model"] = float(model_latency_s)
        if reasoning_s is not None:
            call.latencies["reasoning"] = float(reasoning_s)
        return await self._pipeline.run(call)

    def dispatch_many(self, calls: Iterable[CallInput], **options: Any) -> list[DispatchResult]:
        """Run several calls synchronously; see ``adispatch_many``."""
        return self._run_sync(self.adispatch_many(calls, **options))

    async def adispatch_many(
        self, calls: Iterable[CallInput], *, stop_when: StopCheck | None = None, **options: Any
    ) -> list[DispatchResult]:
        """Run several calls: consecutive read-only, concurrency-safe calls in parallel, the others in order.

        Args:
            calls: ``ToolCall`` values, ``{"name", "arguments"[, "id"]}`` mappings or ``(name, arguments)`` pairs.
                A ``ToolCall``'s parser repairs go into its trace, and its stamp (``checked``) spares it a
                second validation.
            stop_when: asked before each call (or parallel batch) starts; when it returns a message, that
                call and every later one are not run: each is rejected as ``not_run`` with the message.
            **options: passed to ``adispatch`` for every call (``session_id``, ``trigger``, ...).

        Returns:
            One result per call, in the order given.
        """
        items = [call_parts(c) for c in calls]
        results: list[DispatchResult | None] = [None] * len(items)
        index = 0
        while index < len(items):
            stop = stop_when() if stop_when is not None else None
            if stop is not None:
                for i in range(index, len(items)):
                    results[i] = self.refuse(
                        items[i][0],
                        items[i][1],
                        reason="not_run",
                        message=stop,
                        suggestion="call it again in a later run if it is still needed",
                        session_id=options.get("session_id", "default"),
                        trigger=options.get("trigger", "model"),
                        call_id=items[i][2],
                    )
                break
            batch = [index]
            tool = self.registry.get(items[index][0])
            if tool is not None and tool.parallel_safe:
                while index + len(batch) < len(items):
                    nxt = self.registry.get(items[index + len(batch)][0])
                    if nxt is None or not nxt.parallel_safe:
                        break
                    batch.append(index + len(batch))
            pending = [
                self.adispatch(
                    items[i][0],
                    items[i][1],
                    **{
                        **options,
                        "call_id": items[i][2] or options.get("call_id"),
                        "repairs": items[i][3] or options.get("repairs", ()),
                        "checked": items[i][4],
                    },
                )
                for i in batch
            ]
            # A call on its own runs in this task; only a parallel batch needs tasks of its own.
            outs = [await pending[0]] if len(pending) == 1 else await asyncio.gather(*pending)
            for i, out in zip(batch, outs, strict=True):
                results[i] = out
            index += len(batch)
        return [r for r in results if r is not None]

    def refuse(
        self,
        name: str,
        args: Any,
        *,
        reason: str,
        message: str,
        suggestion: str | None,
        session_id: str = "default",
        trigger: str = "model",
        call_id: str | None = None,
    ) -> DispatchResult:
        """Record a call that is not run (a budget or a per-turn cap refused it) as ``rejected``, with a trace.

        Nothing is invoked and no idempotency record is made: the same call may run later.
        """
        call = self._pipeline.new_call(name, args, session_id, trigger, call_id)
        broken = self._pipeline.reject_unreadable(call, args)
        if broken is not None:
            return broken
        call.tool = self.registry.get(call.name)
        if isinstance(args, Mapping):
            call.args = dict(args)
        return self._pipeline.reject(call, reason, message, suggestion)

    def approve(self, approval_id: str, args: Mapping[str, Any] | None = None) -> DispatchResult:
        """Approve a suspended call and run it now (synchronously); see ``aapprove``."""
        return self._run_sync(self.aapprove(approval_id, args))

    async def aapprove(self, approval_id: str, args: Mapping[str, Any] | None = None) -> DispatchResult:
        """Approve a suspended call and run it, optionally with arguments a person edited.

        The call goes through validation, idempotency, quota and freshness again (state may have changed
        while it waited); its timer starts when it is invoked. An approval is consumed once: if the resumed
        call is rejected (stale state, quota), a later identical call asks for approval again.

        Raises:
            ConfigError: the approval id is unknown or was already decided.
        """
        record = self._state.decide_approval(approval_id, "approved", None, self.clock.time())
        if record is None:
            raise ConfigError(self._approval_missing(approval_id))
        call = self._pipeline.new_call(
            record.tool, dict(args) if args is not None else record.args, record.session_id, "approval", None
        )
        call.approval_id, call.approved = approval_id, True
        if args is not None:
            call.repairs.append({"kind": "approval_edit", "path": "", "before": record.args, "after": dict(args)})
        return await self._pipeline.run(call)

    def deny(self, approval_id: str, reason: str = "denied") -> DispatchResult:
        """Deny a suspended call: it never runs, and the result tells the model why.

        Raises:
            ConfigError: the approval id is unknown or was already decided.
        """
        record = self._state.decide_approval(approval_id, "denied", reason, self.clock.time())
        if record is None:
            raise ConfigError(self._approval_missing(approval_id))
        call = self._pipeline.new_call(record.tool, record.args, record.session_id, "approval", None)
        call.approval_id, call.args = approval_id, record.args
        call.tool = self.registry.get(record.tool)
        return self._pipeline.reject(
            call,
            "approval_denied",
            f"a person denied this {record.tool} call: {reason}",
            "do not call it again with these arguments; tell the user or choose another action",
            recoverable=True,
        )

    def approvals(self, state: str | None = "pending") -> list[PendingApproval]:
        """Suspended calls (``state=None`` for every approval record)."""
        return self._state.approvals(state)

    def rollback(self, session_id: str) -> list[DispatchResult]:
        """Run the session's pending compensations, newest first (synchronously); see ``arollback``."""
        return self._run_sync(self.arollback(session_id))

    async def arollback(self, session_id: str) -> list[DispatchResult]:
        """Run the session's pending compensations, newest first; each is traced and marked done.

        Returns:
            One result per compensation, in the order run.
        """
        return await self._pipeline.rollback(session_id)

    def saga(self, session_id: str) -> list[SagaEntry]:
        """The session's saga journal, oldest first."""
        return self._saga.entries(session_id)

    def metrics(self, tool: str | None = None) -> MetricsReport:
        """Per-tool rates over the persisted traces, flagged against the action thresholds.

        ``extra["abandoned_threads"]`` is live: per tool, calls given up at their timeout whose worker thread
        is still running them in this process.
        """
        found = report([t.to_dict() for t in self._state.traces(tool=tool)])
        abandoned = self._executor.abandoned()
        if tool is not None:
            abandoned = {k: v for k, v in abandoned.items() if k == tool}
        return replace(found, extra={**found.extra, "abandoned_threads": abandoned})

    def trace(self, trace_id: str) -> DispatchTrace | None:
        """A persisted trace."""
        return self._state.trace(trace_id)

    def traces(
        self, *, session_id: str | None = None, tool: str | None = None, limit: int | None = None
    ) -> list[DispatchTrace]:
        """Persisted traces, oldest first (the newest ``limit`` when given)."""
        return self._state.traces(session_id=session_id, tool=tool, limit=limit)

    def full_result(self, trace_id: str) -> str | None:
        """The full, unbounded result text of a call (for errors and rejections: the envelope the model saw)."""
        return self._state.full_result(trace_id)

    def flush(self) -> None:
        """Write buffered read-only traces now (reads of traces and ``close`` do this too)."""
        self._state.flush()

    def close(self) -> None:
        """Write buffered traces, then release worker threads, event loops and the store."""
        self._state.flush()
        self._executor.close()
        with self._loops_lock:
            for loop in self._loops:
                if not loop.is_running() and not loop.is_closed():
                    loop.close()
            self._loops.clear()
        self.store.close()

    # ------------------------------------------------------------------ helpers

    def _approval_missing(self, approval_id: str) -> str:
        record = self._state.approval(approval_id)
        if record is None:
            return f"no approval {approval_id!r}; list pending ones with Dispatcher.approvals()"
        return f"approval {approval_id!r} was already {record.state}; each approval is decided once"

    def _in_sync_call(self) -> bool:
        """Whether the running task is the one a sync API call started on this thread's loop."""
        task = getattr(self._local, "task", None)
        return task is not None and asyncio.current_task() is task

    def _run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            coro.close()
            raise ConfigError("the sync API was called inside a running event loop; await the a-prefixed method")
        if self._tool_loop is not None and self._tool_loop.is_running():
            future = asyncio.run_coroutine_threadsafe(coro, self._tool_loop)
            try:
                return future.result()
            except BaseException:
                future.cancel()  # an interrupt of the waiting thread stops the call too
                raise
        loop: asyncio.AbstractEventLoop | None = getattr(self._local, "loop", None)
        if loop is None or loop.is_closed():
            loop = asyncio.new_event_loop()
            self._local.loop = loop
            with self._loops_lock:
                self._loops.append(loop)
        # Only the sync API runs this thread's loop, one call at a time: while this task itself (not a task it
        # starts, such as a call of a parallel batch) waits on a sync tool, the loop has nothing it needs to run.
        task = loop.create_task(coro)
        self._local.task = task
        try:
            return loop.run_until_complete(task)
        finally:
            self._local.task = None
