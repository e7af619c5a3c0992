"""Execution: the timer starts at invocation, timeouts per kind of tool, errors as model-visible JSON."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from tooldispatch.dispatch import Dispatcher, ManualClock, Registry
from tooldispatch.errors import ConfigError, ToolError

from . import proc_tools
from .conftest import World, build_registry, no_sleep


def test_timer_starts_at_invocation(clock: ManualClock) -> None:
    """Model and reasoning time are recorded apart; only the tool's own run counts as tool latency."""

    def work(n: int) -> dict[str, int]:
        clock.advance(2.0)
        return {"n": n}

    reg = Registry()
    reg.register("work", work, read_only=True, timeout_s=5)
    d = Dispatcher(reg, clock=clock)
    r = d.dispatch("work", {"n": 1}, model_latency_s=100.0, reasoning_s=40.0)
    assert r.ok
    assert r.trace.latencies == {"model": 100.0, "reasoning": 40.0, "admission": 0.0, "tool": 2.0, "total": 2.0}


def test_approval_wait_does_not_count_against_the_timer(world: World, clock: ManualClock) -> None:
    """An approval that waits 1,000 s leaves the 30 s tool budget whole; the wall span shows the wait."""
    d = Dispatcher(build_registry(world), clock=clock)
    pending = d.dispatch("cancel_order", {"order_id": "o1"}, session_id="s1")
    clock.advance(1000)
    assert pending.approval_id is not None
    r = d.approve(pending.approval_id)
    assert (r.status, r.trace.latencies["tool"], r.trace.latencies["admission"]) == ("ok", 0.0, 0.0)
    assert r.trace.started_at - pending.trace.started_at == 1000


def test_sync_timeout_is_recorded_as_possibly_running() -> None:
    """A sync tool past its timeout returns a timeout error; its thread is recorded as possibly running."""
    release = threading.Event()
    reg = Registry()
    reg.register(
        "hang",
        lambda: release.wait(30),
        schema={"type": "object", "properties": {}},
        read_only=True,
        timeout_s=0.05,
        max_attempts=1,
    )
    d = Dispatcher(reg)
    r = d.dispatch("hang", {})
    release.set()
    assert (r.status, r.reason, r.trace.possibly_running) == ("error", "timeout", True)
    assert json.loads(r.content) == {
        "error": "timeout",
        "tool": "hang",
        "message": "hang did not finish within 0.05 s",
        "recoverable": True,
        "attempts": 1,
        "retried": False,
        "suggestion": "try again later, or ask for less",
    }


def test_async_timeout_cancels_the_tool() -> None:
    """An async tool past its timeout is cancelled (it sees CancelledError) and not recorded as running."""
    seen: list[str] = []

    async def slow() -> dict[str, str]:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return {}

    reg = Registry()
    reg.register("slow", slow, read_only=True, timeout_s=0.05, max_attempts=1)
    r = Dispatcher(reg).dispatch("slow", {})
    assert (r.reason, r.trace.possibly_running, seen) == ("timeout", False, ["cancelled"])


def test_an_async_tool_runs_in_the_dispatching_task_and_a_caller_cancel_stays_a_cancel() -> None:
    """An async tool runs in the task that dispatched it (no task of its own); cancelling that task cancels the
    tool and reaches the caller as a cancellation, not as the tool's timeout."""
    ran_in: list[asyncio.Task[Any] | None] = []
    seen: list[str] = []

    async def where() -> dict[str, int]:
        ran_in.append(asyncio.current_task())
        return {}

    started: list[int] = []

    async def hang() -> dict[str, int]:
        started.append(1)
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled")
            raise
        return {}

    reg = Registry()
    reg.register("where", where, read_only=True)
    reg.register("hang", hang, read_only=True, timeout_s=10, max_attempts=1)
    d = Dispatcher(reg)

    async def main() -> tuple[Any, Any]:
        first = await d.adispatch("where", {})
        task = asyncio.create_task(d.adispatch("hang", {}))
        while not started:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return asyncio.current_task(), first

    mine, first = asyncio.run(main())
    assert (first.status, ran_in, seen) == ("ok", [mine], ["cancelled"])
    d.close()


def test_side_effecting_timeout_is_not_retried_and_outcome_unknown() -> None:
    """A side-effecting timeout runs once, is not retried, and a repeat is a conflict (outcome unknown)."""
    release = threading.Event()
    runs: list[int] = []

    def charge(amount: int) -> dict[str, int]:
        runs.append(amount)
        release.wait(30)
        return {"charged": amount}

    reg = Registry()
    reg.register("charge", charge, read_only=False, timeout_s=0.05, max_attempts=3)
    d = Dispatcher(reg, sleep=no_sleep)
    r = d.dispatch("charge", {"amount": 5})
    again = d.dispatch("charge", {"amount": 5})
    release.set()
    body = json.loads(r.content)
    assert (r.reason, r.trace.attempts, body["recoverable"], body["retried"]) == ("timeout", 1, False, False)
    assert body["suggestion"] == (
        "the action may or may not have happened; check the state with a read-only tool before doing anything else"
    )
    assert (again.status, again.reason) == ("rejected", "idempotency_conflict")
    assert runs == [5]


def test_process_tool_is_killed_at_the_deadline(tmp_path: Path) -> None:
    """A process-isolated tool past its timeout is killed: its pid no longer exists afterwards."""
    pid_file = tmp_path / "pid"
    reg = Registry()
    reg.register(
        "sleep_forever", proc_tools.sleep_forever, read_only=True, isolation="process", timeout_s=1, max_attempts=1
    )
    r = Dispatcher(reg).dispatch("sleep_forever", {"pid_file": str(pid_file)})
    assert (r.status, r.reason) == ("error", "timeout")
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)


def test_process_tool_result_and_crash() -> None:
    """A process tool returns its JSON result; a child that dies mid-call is an exception, never retried."""
    reg = Registry()
    reg.register("add", proc_tools.add, read_only=True, isolation="process")
    reg.register("crash", proc_tools.crash, read_only=False, isolation="process", max_attempts=3)
    d = Dispatcher(reg)
    assert d.dispatch("add", {"a": 2, "b": 3}).content == '{"sum": 5}'
    crashed = d.dispatch("crash", {"code": 3})
    assert (crashed.status, crashed.reason, crashed.trace.attempts) == ("error", "exception", 1)
    assert json.loads(crashed.content)["message"] == "crash crashed: the tool's process exited with code 3 mid-call"


def test_unexpected_exception_is_wrapped() -> None:
    """An exception from a tool becomes an 'exception' result naming its type; nothing is raised."""
    reg = Registry()
    reg.register("boom", lambda: 1 / 0, schema={"type": "object", "properties": {}}, read_only=True, max_attempts=1)
    r = Dispatcher(reg).dispatch("boom", {})
    assert (r.status, r.reason, r.trace.error_type) == ("error", "exception", "ZeroDivisionError")
    assert json.loads(r.content)["message"] == "boom raised an unexpected error: ZeroDivisionError: division by zero"


def test_non_json_result_is_a_clear_error() -> None:
    """A tool that returns a set gets 'invalid_result' saying the value is not JSON, and is not retried."""
    reg = Registry()
    reg.register("bad", proc_tools.not_json, read_only=True, max_attempts=3)
    r = Dispatcher(reg).dispatch("bad", {})
    assert (r.status, r.reason, r.trace.attempts) == ("error", "invalid_result", 1)
    assert json.loads(r.content)["message"] == (
        "bad returned a value that is not JSON: set is not JSON-serializable (Object of type set is not JSON "
        "serializable)"
    )


@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_misbehaving_tools_end_as_results_and_their_traces_are_stored(tmp_path: Path, isolation: str) -> None:
    """A result with a lone surrogate, one nested 5,000 levels, and an exception that cannot be shown:
    each call ends with a result, never an exception, and every trace is written to the file."""
    reg = Registry()
    for name in ("lone_surrogate", "too_deep", "unprintable"):
        reg.register(name, getattr(proc_tools, name), read_only=True, isolation=isolation, max_attempts=1)
    d = Dispatcher(reg, store=tmp_path / "state.db")
    surrogate = d.dispatch("lone_surrogate", {}, session_id="s")
    assert (surrogate.status, surrogate.content) == ("ok", '{"text": "a\\ud800b"}')
    assert json.loads(surrogate.content) == {"text": "a\ud800b"}  # the escape reads back as the same value
    deep = d.dispatch("too_deep", {}, session_id="s")
    assert (deep.status, deep.reason) == ("error", "invalid_result")
    assert json.loads(deep.content)["message"] == (
        "too_deep returned a value that is not JSON: list is nested too deeply to serialize"
    )
    broken = d.dispatch("unprintable", {}, session_id="s")
    assert (broken.status, broken.reason) == ("error", "exception")
    assert json.loads(broken.content)["message"] == (
        "unprintable raised an unexpected error: Unprintable: <Unprintable that cannot be shown as text>"
    )
    d.close()
    stored = Dispatcher(reg, store=tmp_path / "state.db")
    assert [t.status for t in stored.traces(session_id="s")] == ["ok", "error", "error"]
    stored.close()


@pytest.mark.parametrize("raised", [SystemExit(3), KeyboardInterrupt(), asyncio.CancelledError(), GeneratorExit()])
def test_an_async_tool_that_exits_or_cancels_itself_is_a_failed_call(raised: BaseException) -> None:
    """Raised by the tool itself, these end that call as an error result; the caller and the loop go on."""

    async def misbehave() -> dict[str, int]:
        raise raised

    async def fine() -> dict[str, int]:
        return {"ok": 1}

    reg = Registry()
    reg.register("misbehave", misbehave, read_only=True, max_attempts=1)
    reg.register("fine", fine, read_only=True)
    d = Dispatcher(reg)

    async def both() -> tuple[Any, Any]:
        return await d.adispatch("misbehave", {}, session_id="s"), await d.adispatch("fine", {}, session_id="s")

    r, after = asyncio.run(both())
    assert (r.status, r.reason, after.status) == ("error", "exception", "ok")
    assert json.loads(r.content)["message"].startswith(
        f"misbehave raised an unexpected error: RuntimeError: the tool raised {type(raised).__name__}"
    )
    assert d.dispatch("misbehave", {}, session_id="s").reason == "exception"  # the sync API too
    assert d.dispatch("fine", {}, session_id="s").status == "ok"
    d.close()


def test_read_only_flake_is_retried_with_backoff() -> None:
    """A read-only tool failing once then succeeding is retried; the wait is the jittered backoff."""
    waits: list[float] = []
    calls: list[int] = []

    async def record_sleep(s: float) -> None:
        waits.append(s)

    def flaky() -> dict[str, int]:
        calls.append(1)
        if len(calls) == 1:
            raise ToolError("503", status=503)
        return {"ok": 1}

    reg = Registry()
    reg.register("flaky", flaky, schema={"type": "object", "properties": {}}, read_only=True, max_attempts=2)
    r = Dispatcher(reg, sleep=record_sleep, rand=lambda: 0.5).dispatch("flaky", {})
    assert (r.status, r.trace.attempts, r.trace.retried, waits) == ("ok", 2, True, [0.05])


def test_retry_after_is_honoured() -> None:
    """A ToolError with retry_after makes the dispatcher wait exactly that long before the retry."""
    waits: list[float] = []
    calls: list[int] = []

    async def record_sleep(s: float) -> None:
        waits.append(s)

    def limited() -> dict[str, int]:
        calls.append(1)
        if len(calls) == 1:
            raise ToolError("429", status=429, retry_after=3.0)
        return {}

    reg = Registry()
    reg.register("limited", limited, schema={"type": "object", "properties": {}}, read_only=True)
    assert Dispatcher(reg, sleep=record_sleep).dispatch("limited", {}).ok
    assert waits == [3.0]


def test_sync_api_refuses_a_running_loop(dispatcher: Dispatcher) -> None:
    """Calling dispatch() inside a running loop raises ConfigError pointing at adispatch."""

    async def inside() -> None:
        dispatcher.dispatch("refresh_drivers", {})

    with pytest.raises(ConfigError, match="await the a-prefixed method"):
        asyncio.run(inside())


def test_sync_api_works_from_a_plain_thread(dispatcher: Dispatcher, world: World) -> None:
    """dispatch() works from a thread that has no event loop."""
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(dispatcher.dispatch("refresh_drivers", {}).status))
    t.start()
    t.join()
    assert out == ["ok"]


async def test_adispatch_same_semantics(dispatcher: Dispatcher, world: World) -> None:
    """adispatch gives the same result shape as dispatch."""
    r = await dispatcher.adispatch("send_message", {"to": "a", "subject": "b", "body": "c"}, session_id="s")
    assert (r.status, r.content) == ("ok", '{"sent": 1, "to": "a"}')


def test_dispatch_many_runs_safe_reads_in_parallel() -> None:
    """Two read-only, concurrency-safe calls meet at a barrier, which only works if they run together."""
    barrier = threading.Barrier(2, timeout=5)
    order: list[str] = []

    def meet(tag: str) -> dict[str, str]:
        barrier.wait()
        return {"tag": tag}

    def write(tag: str) -> dict[str, str]:
        order.append(tag)
        return {"tag": tag}

    reg = Registry()
    reg.register("meet", meet, read_only=True, concurrency_safe=True)
    reg.register("write", write, read_only=False)
    d = Dispatcher(reg)
    results = d.dispatch_many(
        [
            ("meet", {"tag": "a"}),
            ("meet", {"tag": "b"}),
            {"name": "write", "arguments": '{"tag": "c"}', "id": "c1"},
            ("write", {"tag": "d"}),
        ],
        session_id="s",
    )
    assert [r.content for r in results] == ['{"tag": "a"}', '{"tag": "b"}', '{"tag": "c"}', '{"tag": "d"}']
    assert results[2].trace.call_id == "c1"
    assert order == ["c", "d"]


def test_dispatch_many_keeps_undeclared_tools_sequential() -> None:
    """A read-only tool not declared concurrency-safe is not run in parallel: the barrier breaks."""
    barrier = threading.Barrier(2, timeout=0.2)

    def meet() -> dict[str, int]:
        barrier.wait()
        return {}

    reg = Registry()
    reg.register("meet", meet, read_only=True, max_attempts=1)
    results = Dispatcher(reg).dispatch_many([("meet", {}), ("meet", {})])
    assert [r.reason for r in results] == ["exception", "exception"]


def test_system_exit_in_a_tool_is_a_tool_failure() -> None:
    """A sync tool calling sys.exit does not end the program: the model gets an 'exception' result."""
    import sys

    reg = Registry()
    reg.register(
        "quit", lambda: sys.exit(3), schema={"type": "object", "properties": {}}, read_only=True, max_attempts=1
    )
    r = Dispatcher(reg).dispatch("quit", {})
    assert (r.status, r.reason) == ("error", "exception")
    assert (
        json.loads(r.content)["message"]
        == "quit raised an unexpected error: RuntimeError: the tool raised SystemExit: 3"
    )


def test_dispatch_many_accepts_parsed_tool_calls(dispatcher: Dispatcher) -> None:
    """ToolCall values from the parser dispatch directly; the tool message carries their call id."""
    from tooldispatch.types import ToolCall

    calls = [
        ToolCall(name="refresh_drivers", arguments={}, id="call_0"),
        ToolCall(name="nope", arguments={}, id="call_1"),
    ]
    first, second = dispatcher.dispatch_many(calls, session_id="s1")
    assert first.tool_message() == {"role": "tool", "tool_call_id": "call_0", "content": '{"drivers": ["d1", "d2"]}'}
    assert (second.reason, second.trace.call_id) == ("tool_hallucination", "call_1")
