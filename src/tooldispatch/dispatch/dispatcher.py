"""The dispatcher: one call from the model to the tool and back, safely.

Pipeline for each call (one async implementation; ``dispatch`` is a thin sync wrapper that runs it on the
calling thread's own event loop, where a sync tool's outcome is waited for directly instead of through the
loop, see ``executor``):

1. name admission: an unknown tool is rejected as ``tool_hallucination`` with the nearest names;
2. validation (null optionals dropped, strict requireds), rejected as ``validation``;
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
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import threading
import time
import uuid
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from tooldispatch.dispatch import admission
from tooldispatch.dispatch.bounding import bound
from tooldispatch.dispatch.call import Call, CallInput, StopCheck, call_parts
from tooldispatch.dispatch.clock import Clock, SystemClock
from tooldispatch.dispatch.executor import ChildProcessDied, Executor, InvalidResult, NoCapacity, result_text
from tooldispatch.dispatch.failures import describe_failure
from tooldispatch.dispatch.idempotency import IdempotencyStore, Record, fingerprint, judge, make_key
from tooldispatch.dispatch.metrics import MetricsReport, report
from tooldispatch.dispatch.registry import Registry, ToolDef
from tooldispatch.dispatch.result import DispatchResult, Status, error_envelope
from tooldispatch.dispatch.retry import Phase, decide, is_permanent, phase_of
from tooldispatch.dispatch.saga import SagaEntry, SagaJournal, compensation_key, inverse_args, resource_of
from tooldispatch.dispatch.state import PendingApproval, State
from tooldispatch.dispatch.trace import DispatchTrace, mask
from tooldispatch.dispatch.validate import MAX_DEPTH, escape_surrogates, unreadable, validate_args
from tooldispatch.errors import ConfigError, ToolTimeout
from tooldispatch.store import StateStore, open_store

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
        self._sleep = sleep or asyncio.sleep
        self._rand = rand
        self.compensate_on_failure = compensate_on_failure
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
        now = self.clock.time()
        self._idem.purge(now)
        self.warnings: list[str] = list(registry.warnings)
        for tool in registry:
            change = self._state.pin_description(tool, now)
            if change:
                self.warnings.append(change)

    # ------------------------------------------------------------------ public API

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

        Returns:
            The result; tool failures never raise, they come back as ``status="error"`` with a
            model-visible JSON envelope in ``content``.
        """
        call = self._new_call(name, args, session_id, trigger, call_id)
        call.repairs.extend(repairs)
        if model_latency_s is not None:
            call.latencies["model"] = float(model_latency_s)
        if reasoning_s is not None:
            call.latencies["reasoning"] = float(reasoning_s)
        return await self._pipeline(call)

    def dispatch_many(self, calls: Iterable[CallInput], **options: Any) -> list[DispatchResult]:
        """Run several calls synchronously; see ``adispatch_many``."""
        return self._run_sync(self.adispatch_many(calls, **options))

    async def adispatch_many(
        self, calls: Iterable[CallInput], *, stop_when: StopCheck | None = None, **options: Any
    ) -> list[DispatchResult]:
        """Run several calls: consecutive read-only, concurrency-safe calls in parallel, the others in order.

        Args:
            calls: ``ToolCall`` values, ``{"name", "arguments"[, "id"]}`` mappings or ``(name, arguments)`` pairs.
                A ``ToolCall``'s parser repairs go into its trace.
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
        call = self._new_call(name, args, session_id, trigger, call_id)
        broken = self._unreadable(call, args)
        if broken is not None:
            return broken
        call.tool = self.registry.get(call.name)
        if isinstance(args, Mapping):
            call.args = dict(args)
        return self._reject(call, reason, message, suggestion)

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
        call = self._new_call(
            record.tool, dict(args) if args is not None else record.args, record.session_id, "approval", None
        )
        call.approval_id, call.approved = approval_id, True
        if args is not None:
            call.repairs.append({"kind": "approval_edit", "path": "", "before": record.args, "after": dict(args)})
        return await self._pipeline(call)

    def deny(self, approval_id: str, reason: str = "denied") -> DispatchResult:
        """Deny a suspended call: it never runs, and the result tells the model why.

        Raises:
            ConfigError: the approval id is unknown or was already decided.
        """
        record = self._state.decide_approval(approval_id, "denied", reason, self.clock.time())
        if record is None:
            raise ConfigError(self._approval_missing(approval_id))
        call = self._new_call(record.tool, record.args, record.session_id, "approval", None)
        call.approval_id, call.args = approval_id, record.args
        call.tool = self.registry.get(record.tool)
        return self._reject(
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
        results = []
        for entry in self._saga.pending(session_id):
            if not self._saga.take(entry.id):
                continue
            call = self._new_call(entry.inverse_tool, entry.inverse_args, session_id, "compensation", None)
            call.compensation = entry
            result = await self._pipeline(call)
            self._saga.finish(entry.id, ok=result.ok, trace_id=result.trace.id)
            if result.ok and entry.idempotency_key:
                self._idem.release(entry.idempotency_key)
            results.append(result)
        return results

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

    # ------------------------------------------------------------------ the pipeline

    def _new_call(self, name: str, args: Any, session_id: str, trigger: str, call_id: str | None) -> Call:
        return Call(
            trace_id=os.urandom(16).hex(),
            session_id=str(session_id),
            name=str(name),
            raw_args=args,
            trigger=trigger,
            call_id=call_id,
            t0=self.clock.monotonic(),
            wall0=self.clock.time(),
        )

    async def _pipeline(self, call: Call) -> DispatchResult:
        broken = self._unreadable(call, call.raw_args)
        if broken is not None:
            return broken
        tool = self.registry.get(call.name)
        if tool is None:
            verdict = admission.admit_name(call.name, self.registry.names)
            return self._reject(call, verdict.reason or "tool_hallucination", verdict.message, verdict.suggestion)
        call.tool = tool
        raw = call.raw_args
        if isinstance(raw, str | bytes):
            try:
                raw = json.loads(raw) if raw.strip() else {}
            except (ValueError, RecursionError) as exc:
                return self._reject(
                    call,
                    "validation",
                    f"the arguments are not valid JSON ({exc})",
                    "send the arguments as one JSON object",
                )
            broken = self._unreadable(call, raw)
            if broken is not None:
                return broken
        checked = validate_args(tool, raw)
        call.args = checked.args
        call.repairs.extend(checked.repairs)
        if not checked.ok:
            return self._reject(call, "validation", checked.message, "fix the arguments as described and call again")
        if tool.side_effecting:
            call.idem_key = (
                compensation_key(call.compensation) if call.compensation else make_key(call.session_id, tool, call.args)
            )
            existing = self._idem.lookup(call.idem_key, self.clock.time())
            if existing is not None:
                return self._answer_existing(call, existing)
        if call.compensation is None:
            rejected = self._admit_resources(call, tool)
            if rejected is not None:
                return rejected
        if call.idem_key is not None:
            now = self.clock.time()
            existing = self._idem.claim(
                call.idem_key,
                session_id=call.session_id,
                tool=tool.name,
                fp=fingerprint(call.args),
                trace_id=call.trace_id,
                now=now,
                ttl_s=tool.idempotency_ttl_s,
            )
            call.idem_expires_at = now + tool.idempotency_ttl_s
            if existing is not None:
                return self._answer_existing(call, existing)
        scope = admission.quota_scope(tool, call.args, call.session_id) if call.compensation is None else None
        if (
            scope is not None
            and tool.quota is not None
            and self._state.take_quota(tool.name, scope, tool.quota.limit) is None
        ):
            if call.idem_key is not None:
                self._idem.release(call.idem_key)
            verdict = admission.admit_quota(tool, call.args, tool.quota.limit)
            return self._reject(call, "quota_exceeded", verdict.message, verdict.suggestion)
        return await self._execute(call, tool)

    def _admit_resources(self, call: Call, tool: ToolDef) -> DispatchResult | None:
        scope = admission.quota_scope(tool, call.args, call.session_id)
        if scope is not None:
            verdict = admission.admit_quota(tool, call.args, self._state.quota_used(tool.name, scope))
            if verdict.outcome == "reject":
                return self._reject(call, verdict.reason or "quota_exceeded", verdict.message, verdict.suggestion)
        fresh = tool.requires_fresh_state
        if fresh is not None:
            verdict = admission.admit_freshness(
                tool,
                self._state.refreshed_at(call.session_id, fresh.resource),
                self.clock.time(),
                self.registry.refresher_for(fresh.resource),
            )
            if verdict.outcome == "reject":
                return self._reject(
                    call, verdict.reason or "stale_state_must_refresh", verdict.message, verdict.suggestion
                )
        verdict = admission.admit_approval(tool, call.approved)
        if verdict.outcome == "approval":
            waiting = self._state.pending_for(call.session_id, tool.name, call.args)
            if waiting is not None:
                call.approval_id = waiting.id
            else:
                call.approval_id = f"apr_{uuid.uuid4().hex[:16]}"
                self._state.add_approval(
                    call.approval_id,
                    session_id=call.session_id,
                    tool=tool.name,
                    args=call.args,
                    trigger=call.trigger,
                    trace_id=call.trace_id,
                    now=self.clock.time(),
                )
            content = json.dumps(
                {
                    "status": "awaiting_approval",
                    "tool": tool.name,
                    "approval_id": call.approval_id,
                    "message": verdict.message,
                    "suggestion": verdict.suggestion,
                },
                ensure_ascii=False,
            )
            return self._finish(call, "awaiting_approval", "awaiting_approval", content, full=None)
        return None

    def _answer_existing(self, call: Call, record: Record) -> DispatchResult:
        assert call.tool is not None
        verdict = judge(record, fingerprint(call.args), call.tool.name)
        if verdict.action == "replay":
            status: Status = "ok" if record.status == "ok" else "error"
            return self._finish(
                call, status, "idempotent_replay", record.content or "", full=None, extra={"replay_of": record.trace_id}
            )
        return self._reject(
            call,
            verdict.action,
            verdict.message,
            verdict.suggestion,
            recoverable=verdict.action == "idempotency_mismatch",
        )

    async def _execute(self, call: Call, tool: ToolDef) -> DispatchResult:
        call.latencies["admission"] = self.clock.monotonic() - call.t0
        tool_time = 0.0
        error: BaseException | None = None
        phase: Phase = "during"
        value: Any = None
        text: str | None = None
        ran: tuple[BaseException, Phase] | None = None  # the last failure of an attempt that started
        while True:
            call.attempts += 1
            if call.idem_key is not None:
                self._keep_in_flight(call, tool)
            attempt = await self._executor.run(tool, call.args, exclusive=self._in_sync_call())
            tool_time += attempt.elapsed_s
            error, phase = None, "during"
            if attempt.timed_out:
                error = ToolTimeout(f"{tool.name} did not finish within {tool.timeout_s:g} s")
                call.possibly_running = call.possibly_running or attempt.possibly_running
            elif attempt.error is not None:
                error = attempt.error
                phase = "after" if isinstance(error, InvalidResult) else phase_of(error)
            else:
                try:
                    text = result_text(attempt.value)
                    value = attempt.value
                except InvalidResult as exc:
                    error = exc
                    phase = "after"
            if error is None:
                break
            if isinstance(error, NoCapacity):
                if ran is not None:  # an earlier attempt did start: its failure is the one to report
                    error, phase = ran
                    break
            else:
                ran = (error, phase)
            if isinstance(error, InvalidResult):
                break
            decision = decide(tool.read_only, phase, error, call.attempts, tool.max_attempts, rand=self._rand)
            if not decision.retry:
                break
            call.retried = True
            await self._sleep(decision.delay_s)
        call.latencies["tool"] = tool_time
        if error is None and text is not None:
            return self._succeed(call, tool, value, text)
        assert error is not None
        return await self._fail(call, tool, error, phase)

    def _keep_in_flight(self, call: Call, tool: ToolDef) -> None:
        """Make sure the in-flight record outlives this attempt: it must not expire while the call may still
        be waiting for a worker or running (a short ``idempotency_ttl_s``, or a retry). It then lasts a full
        TTL past the attempt's latest end."""
        now = self.clock.time()
        latest_end = now + self._executor.capacity_wait_s(tool) + tool.timeout_s
        if call.idem_expires_at is None or call.idem_expires_at <= latest_end:
            assert call.idem_key is not None
            call.idem_expires_at = latest_end + tool.idempotency_ttl_s
            self._idem.extend(call.idem_key, call.idem_expires_at)

    def _succeed(self, call: Call, tool: ToolDef, value: Any, text: str) -> DispatchResult:
        shown = bound(text, tool.result_max_chars, call.trace_id)
        call.bounded_chars = shown.omitted
        now = self.clock.time()
        resource = resource_of(self.registry, tool, call.args, value) if tool.side_effecting else None
        if call.idem_key is not None:
            self._idem.complete(call.idem_key, status="ok", reason=None, content=shown.text, resource=resource)
        supersedes: list[str] = []
        if resource is not None:
            # Before this call's own saga entry exists: it ends the entries of earlier calls only.
            supersedes = self._idem.supersede(resource, keep=call.idem_key)
            supersedes += self._saga.supersede(resource, tool=tool.name, trace_id=call.trace_id)
        if tool.refreshes:
            self._state.stamp_fresh(call.session_id, tool.refreshes, now)
        if tool.compensate and call.compensation is None:
            inverse = self.registry[tool.compensate]
            self._saga.record(
                session_id=call.session_id,
                trace_id=call.trace_id,
                tool=tool.name,
                inverse_tool=inverse.name,
                args=inverse_args(inverse, call.args, value),
                idempotency_key=call.idem_key,
                resource=resource,
                now=now,
            )
        extra = {"supersedes": sorted(set(supersedes))} if supersedes else None
        return self._finish(
            call, "ok", None, shown.text, full=text if shown.bounded else None, value=value, extra=extra
        )

    async def _fail(self, call: Call, tool: ToolDef, error: BaseException, phase: Phase) -> DispatchResult:
        reason, message, suggestion, recoverable = describe_failure(tool, error, phase)
        unknown_outcome = tool.side_effecting and phase != "before" and not is_permanent(error)
        if call.retried:
            message += f" (after {call.attempts} attempts)"
        compensations: list[DispatchResult] = []
        if (
            unknown_outcome
            and self.compensate_on_failure
            and call.compensation is None
            and self._saga.pending(call.session_id)
        ):
            compensations = await self.arollback(call.session_id)
            undone = ", ".join(f"{r.trace.tool} {json.dumps(dict(r.trace.params))}: {r.status}" for r in compensations)
            message += f"; the session's earlier actions were compensated, newest first: {undone}"
        content = error_envelope(
            reason,
            tool.name,
            message,
            recoverable=recoverable,
            attempts=call.attempts,
            retried=call.retried,
            suggestion=suggestion,
        )
        if call.idem_key is not None:
            if not unknown_outcome:
                self._idem.release(call.idem_key)
            elif isinstance(error, ToolTimeout | ChildProcessDied):
                self._idem.mark_unknown(call.idem_key, reason=reason, content=content)
            else:
                self._idem.complete(
                    call.idem_key,
                    status="error",
                    reason=reason,
                    content=content,
                    resource=resource_of(self.registry, tool, call.args),
                )
        extra = {"compensations": [r.trace.id for r in compensations]} if compensations else None
        return self._finish(
            call, "error", reason, content, full=None, error_type=type(error).__name__, message=message, extra=extra
        )

    def _unreadable(self, call: Call, args: Any) -> DispatchResult | None:
        """Reject a call whose arguments nest too deeply, or whose name, id or arguments hold an unpaired
        UTF-16 surrogate (not text); the trace records what it can store.

        Nothing after this step may walk or encode such values: deep ones overflow the recursion that
        validation, hashing and JSON use, and surrogates cannot be encoded. Surrogates are recorded as
        ``\\udXXX`` text; arguments too deep are not recorded.
        """
        problem = unreadable(args, "arguments")
        if problem is None and unreadable([call.name, call.call_id or ""]) is None:
            return None
        call.name, call.call_id = escape_surrogates(call.name), escape_surrogates(call.call_id)
        if problem is not None and problem[0] == "deep":
            call.raw_args = {}
            return self._reject(
                call,
                "validation",
                f"{escape_surrogates('/'.join(problem[1].split('/')[:2]))} nests objects or arrays "
                f"more than {MAX_DEPTH} levels deep",
                "send a flatter object",
            )
        call.raw_args = escape_surrogates(args)
        field = escape_surrogates(problem[1]) if problem is not None else "the tool name or call id"
        return self._reject(
            call,
            "validation",
            f"{field} holds an unpaired UTF-16 surrogate escape (\\ud800 to \\udfff), which is not text",
            "write the character itself (an escape beyond U+FFFF is a pair, high then low) or leave it out, "
            "then call again",
        )

    def _reject(
        self, call: Call, reason: str, message: str, suggestion: str | None, *, recoverable: bool = True
    ) -> DispatchResult:
        content = error_envelope(
            reason, call.name, message, recoverable=recoverable, attempts=0, retried=False, suggestion=suggestion
        )
        return self._finish(call, "rejected", reason, content, full=None, message=message)

    def _finish(
        self,
        call: Call,
        status: Status,
        reason: str | None,
        content: str,
        *,
        full: str | None,
        value: Any = None,
        error_type: str | None = None,
        message: str | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> DispatchResult:
        call.latencies["total"] = self.clock.monotonic() - call.t0
        call.latencies.setdefault("admission", call.latencies["total"])
        call.latencies.setdefault("tool", 0.0)
        tool = call.tool
        params = call.args if call.args or not isinstance(call.raw_args, Mapping) else dict(call.raw_args)
        trace = DispatchTrace(
            id=call.trace_id,
            session_id=call.session_id,
            tool=call.name,
            params=mask(params, tool.sensitive_fields) if tool else dict(params),
            trigger=call.trigger,
            status=status,
            reason=reason,
            attempts=call.attempts,
            retried=call.retried,
            repairs=tuple(call.repairs),
            latencies=dict(call.latencies),
            started_at=call.wall0,
            ended_at=self.clock.time(),
            call_id=call.call_id,
            version=tool.version if tool else None,
            idempotency_key=call.idem_key,
            bounded_chars=call.bounded_chars,
            possibly_running=call.possibly_running,
            approval_id=call.approval_id,
            error_type=error_type or (reason if status == "rejected" else None),
            message=message,
            compensation_of=call.compensation.trace_id if call.compensation else None,
            extra=dict(extra or {}),
        )
        self._state.save_trace(trace, content, full, durable=tool is None or tool.side_effecting)
        return DispatchResult(
            status=status,
            reason=reason,
            content=content,
            trace=trace,
            value=value,
            approval_id=call.approval_id if status == "awaiting_approval" else None,
        )

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
