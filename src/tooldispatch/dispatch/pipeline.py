"""The steps of one call, from the name check to the stored trace: what ``Dispatcher`` runs for every call.

``Pipeline.run`` takes a ``Call`` through name admission, validation, idempotency, resource admission,
execution with retries, and the record (see ``dispatcher`` for the order and what each step decides);
``Pipeline.rollback`` runs a session's compensations through it. The public API, the sync wrappers and the
event loops they run on are ``Dispatcher``'s.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from tooldispatch.dispatch import admission
from tooldispatch.dispatch.bounding import bound
from tooldispatch.dispatch.call import Call
from tooldispatch.dispatch.clock import Clock
from tooldispatch.dispatch.executor import ChildProcessDied, Executor, InvalidResult, NoCapacity, result_text
from tooldispatch.dispatch.failures import describe_failure
from tooldispatch.dispatch.idempotency import IdempotencyStore, Record, fingerprint, judge, make_key
from tooldispatch.dispatch.registry import Registry, ToolDef
from tooldispatch.dispatch.result import DispatchResult, Status, error_envelope
from tooldispatch.dispatch.retry import Phase, decide, is_permanent, phase_of
from tooldispatch.dispatch.saga import SagaJournal, compensation_key, inverse_args, resource_of
from tooldispatch.dispatch.state import State
from tooldispatch.dispatch.trace import DispatchTrace, mask
from tooldispatch.dispatch.validate import MAX_DEPTH, escape_surrogates, unreadable, validate_args
from tooldispatch.errors import ToolTimeout


class Pipeline:
    """The per-call steps over one registry and store, shared by every call a ``Dispatcher`` runs.

    Args:
        registry: the tools.
        state: traces, approvals, quotas and freshness in the store.
        idem: the idempotency records.
        saga: the saga journal.
        executor: runs the tools under their timers.
        clock: time source.
        sleep: how retries wait.
        rand: uniform [0, 1) source for retry jitter.
        compensate_on_failure: run the session's pending compensations when a side-effecting call fails.
        exclusive: whether the running task is a sync API call that may wait on a sync tool directly.
    """

    def __init__(
        self,
        registry: Registry,
        *,
        state: State,
        idem: IdempotencyStore,
        saga: SagaJournal,
        executor: Executor,
        clock: Clock,
        sleep: Callable[[float], Awaitable[None]],
        rand: Callable[[], float],
        compensate_on_failure: bool,
        exclusive: Callable[[], bool],
    ) -> None:
        self.registry = registry
        self.state = state
        self.idem = idem
        self.saga = saga
        self.executor = executor
        self.clock = clock
        self.sleep = sleep
        self.rand = rand
        self.compensate_on_failure = compensate_on_failure
        self.exclusive = exclusive

    def new_call(self, name: str, args: Any, session_id: str, trigger: str, call_id: str | None) -> Call:
        """A fresh ``Call`` with its trace id and start times."""
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

    async def run(self, call: Call) -> DispatchResult:
        """Take one call through every step; tool failures come back as results, never raised."""
        broken = self.reject_unreadable(call, call.raw_args)
        if broken is not None:
            return broken
        tool = self.registry.get(call.name)
        if tool is None:
            verdict = admission.admit_name(call.name, self.registry.names)
            return self.reject(call, verdict.reason or "tool_hallucination", verdict.message, verdict.suggestion)
        call.tool = tool
        raw = call.raw_args
        if isinstance(raw, str | bytes):
            try:
                raw = json.loads(raw) if raw.strip() else {}
            except (ValueError, RecursionError) as exc:
                return self.reject(
                    call,
                    "validation",
                    f"the arguments are not valid JSON ({exc})",
                    "send the arguments as one JSON object",
                )
            broken = self.reject_unreadable(call, raw)
            if broken is not None:
                return broken
        valid = validate_args(tool, raw, checked=call.checked)
        call.args = valid.args
        call.repairs.extend(valid.repairs)
        if not valid.ok:
            return self.reject(call, "validation", valid.message, "fix the arguments as described and call again")
        if tool.side_effecting:
            call.idem_key = (
                compensation_key(call.compensation) if call.compensation else make_key(call.session_id, tool, call.args)
            )
            existing = self.idem.lookup(call.idem_key, self.clock.time())
            if existing is not None:
                return self._answer_existing(call, existing)
        if call.compensation is None:
            rejected = self._admit_resources(call, tool)
            if rejected is not None:
                return rejected
        if call.idem_key is not None:
            now = self.clock.time()
            existing = self.idem.claim(
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
            and self.state.take_quota(tool.name, scope, tool.quota.limit) is None
        ):
            if call.idem_key is not None:
                self.idem.release(call.idem_key)
            verdict = admission.admit_quota(tool, call.args, tool.quota.limit)
            return self.reject(call, "quota_exceeded", verdict.message, verdict.suggestion)
        return await self._execute(call, tool)

    def _admit_resources(self, call: Call, tool: ToolDef) -> DispatchResult | None:
        scope = admission.quota_scope(tool, call.args, call.session_id)
        if scope is not None:
            verdict = admission.admit_quota(tool, call.args, self.state.quota_used(tool.name, scope))
            if verdict.outcome == "reject":
                return self.reject(call, verdict.reason or "quota_exceeded", verdict.message, verdict.suggestion)
        fresh = tool.requires_fresh_state
        if fresh is not None:
            verdict = admission.admit_freshness(
                tool,
                self.state.refreshed_at(call.session_id, fresh.resource),
                self.clock.time(),
                self.registry.refresher_for(fresh.resource),
            )
            if verdict.outcome == "reject":
                return self.reject(
                    call, verdict.reason or "stale_state_must_refresh", verdict.message, verdict.suggestion
                )
        verdict = admission.admit_approval(tool, call.approved)
        if verdict.outcome == "approval":
            waiting = self.state.pending_for(call.session_id, tool.name, call.args)
            if waiting is not None:
                call.approval_id = waiting.id
            else:
                call.approval_id = f"apr_{uuid.uuid4().hex[:16]}"
                self.state.add_approval(
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
            return self.finish(call, "awaiting_approval", "awaiting_approval", content, full=None)
        return None

    async def rollback(self, session_id: str) -> list[DispatchResult]:
        """Run the session's pending compensations, newest first; each is traced and marked done.

        Returns:
            One result per compensation, in the order run.
        """
        results = []
        for entry in self.saga.pending(session_id):
            if not self.saga.take(entry.id):
                continue
            call = self.new_call(entry.inverse_tool, entry.inverse_args, session_id, "compensation", None)
            call.compensation = entry
            result = await self.run(call)
            self.saga.finish(entry.id, ok=result.ok, trace_id=result.trace.id)
            if result.ok and entry.idempotency_key:
                self.idem.release(entry.idempotency_key)
            results.append(result)
        return results

    def _answer_existing(self, call: Call, record: Record) -> DispatchResult:
        assert call.tool is not None
        verdict = judge(record, fingerprint(call.args), call.tool.name)
        if verdict.action == "replay":
            status: Status = "ok" if record.status == "ok" else "error"
            return self.finish(
                call, status, "idempotent_replay", record.content or "", full=None, extra={"replay_of": record.trace_id}
            )
        return self.reject(
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
            attempt = await self.executor.run(tool, call.args, exclusive=self.exclusive())
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
            decision = decide(tool.read_only, phase, error, call.attempts, tool.max_attempts, rand=self.rand)
            if not decision.retry:
                break
            call.retried = True
            await self.sleep(decision.delay_s)
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
        latest_end = now + self.executor.capacity_wait_s(tool) + tool.timeout_s
        if call.idem_expires_at is None or call.idem_expires_at <= latest_end:
            assert call.idem_key is not None
            call.idem_expires_at = latest_end + tool.idempotency_ttl_s
            self.idem.extend(call.idem_key, call.idem_expires_at)

    def _succeed(self, call: Call, tool: ToolDef, value: Any, text: str) -> DispatchResult:
        shown = bound(text, tool.result_max_chars, call.trace_id)
        call.bounded_chars = shown.omitted
        now = self.clock.time()
        resource = resource_of(self.registry, tool, call.args, value) if tool.side_effecting else None
        if call.idem_key is not None:
            self.idem.complete(call.idem_key, status="ok", reason=None, content=shown.text, resource=resource)
        supersedes: list[str] = []
        if resource is not None:
            # Before this call's own saga entry exists: it ends the entries of earlier calls only.
            supersedes = self.idem.supersede(resource, keep=call.idem_key)
            supersedes += self.saga.supersede(resource, tool=tool.name, trace_id=call.trace_id)
        if tool.refreshes:
            self.state.stamp_fresh(call.session_id, tool.refreshes, now)
        if tool.compensate and call.compensation is None:
            inverse = self.registry[tool.compensate]
            self.saga.record(
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
        return self.finish(call, "ok", None, shown.text, full=text if shown.bounded else None, value=value, extra=extra)

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
            and self.saga.pending(call.session_id)
        ):
            compensations = await self.rollback(call.session_id)
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
                self.idem.release(call.idem_key)
            elif isinstance(error, ToolTimeout | ChildProcessDied):
                self.idem.mark_unknown(call.idem_key, reason=reason, content=content)
            else:
                self.idem.complete(
                    call.idem_key,
                    status="error",
                    reason=reason,
                    content=content,
                    resource=resource_of(self.registry, tool, call.args),
                )
        extra = {"compensations": [r.trace.id for r in compensations]} if compensations else None
        return self.finish(
            call, "error", reason, content, full=None, error_type=type(error).__name__, message=message, extra=extra
        )

    def reject_unreadable(self, call: Call, args: Any) -> DispatchResult | None:
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
            return self.reject(
                call,
                "validation",
                f"{escape_surrogates('/'.join(problem[1].split('/')[:2]))} nests objects or arrays "
                f"more than {MAX_DEPTH} levels deep",
                "send a flatter object",
            )
        call.raw_args = escape_surrogates(args)
        field = escape_surrogates(problem[1]) if problem is not None else "the tool name or call id"
        return self.reject(
            call,
            "validation",
            f"{field} holds an unpaired UTF-16 surrogate escape (\\ud800 to \\udfff), which is not text",
            "write the character itself (an escape beyond U+FFFF is a pair, high then low) or leave it out, "
            "then call again",
        )

    def reject(
        self, call: Call, reason: str, message: str, suggestion: str | None, *, recoverable: bool = True
    ) -> DispatchResult:
        content = error_envelope(
            reason, call.name, message, recoverable=recoverable, attempts=0, retried=False, suggestion=suggestion
        )
        return self.finish(call, "rejected", reason, content, full=None, message=message)

    def finish(
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
        self.state.save_trace(trace, content, full, durable=tool is None or tool.side_effecting)
        return DispatchResult(
            status=status,
            reason=reason,
            content=content,
            trace=trace,
            value=value,
            approval_id=call.approval_id if status == "awaiting_approval" else None,
        )
