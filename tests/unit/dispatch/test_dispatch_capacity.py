"""Worker capacity: hung sync tools keep to their own small pool, a call that never started is never recorded as
possibly run, the wait for a worker is not run time, and an in-flight idempotency record outlives its call."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tooldispatch.dispatch import Dispatcher, Registry


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """An event that hanging tools wait on, set at the end so that no test leaves a thread blocked."""
    event = threading.Event()
    yield event
    event.set()


def _registry(release: threading.Event, effects: list[str]) -> Registry:
    reg = Registry()

    def hang(n: int) -> dict[str, int]:
        release.wait(30)
        return {"n": n}

    def hang_write(n: int) -> dict[str, int]:
        effects.append(f"hang_write {n}")
        release.wait(30)
        return {"n": n}

    def fast(n: int) -> dict[str, int]:
        return {"n": n}

    def write(n: int) -> dict[str, int]:
        effects.append(f"write {n}")
        return {"n": n}

    reg.register("hang", hang, read_only=True, concurrency_safe=True, timeout_s=0.2, max_attempts=1)
    reg.register("hang_write", hang_write, read_only=False, timeout_s=0.2, max_attempts=1)
    reg.register("fast", fast, read_only=True, concurrency_safe=True, timeout_s=0.2, max_attempts=1)
    reg.register("write", write, read_only=False, timeout_s=0.2, max_attempts=1)
    return reg


def _wait_until(check: Any, limit_s: float = 10.0) -> None:
    end = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < end, "the condition did not come true"
        time.sleep(0.01)


def test_fault12_hung_tool_cannot_starve_other_tools(release: threading.Event) -> None:
    """Fault 12: after 16 hung calls with max_workers=16, a fast read-only call and a side-effecting call of other
    tools still run (each tool has its own small pool); the hung tool's excess calls never start and say
    no_capacity, not possibly running; the abandoned threads are counted in the metrics."""
    effects: list[str] = []
    with Dispatcher(_registry(release, effects), max_workers=16) as d:
        hung = d.dispatch_many([("hang", {"n": i}) for i in range(16)], session_id="s")
        outcomes = sorted((r.reason, r.trace.possibly_running) for r in hung)
        assert outcomes == [("no_capacity", False)] * 8 + [("timeout", True)] * 8
        refused = next(r for r in hung if r.reason == "no_capacity")
        envelope = json.loads(refused.content)
        assert (envelope["recoverable"], envelope["attempts"]) == (True, 1)
        # How many of the 8 had been given up when the wait ended depends on which deadline came first.
        assert envelope["message"].startswith("hang did not start: all 8 of its workers were busy for 0.2 s")
        assert envelope["message"].endswith("; it was not run")
        fast = d.dispatch("fast", {"n": 1}, session_id="s")
        write = d.dispatch("write", {"n": 1}, session_id="s")
        assert (fast.status, fast.value, write.status, effects) == ("ok", {"n": 1}, "ok", ["write 1"])
        assert d.metrics().extra["abandoned_threads"] == {"hang": 8}
        release.set()
        _wait_until(lambda: d.metrics().extra["abandoned_threads"] == {})


def test_fault12_side_effecting_call_that_never_started_is_not_possibly_run(release: threading.Event) -> None:
    """Fault 12: with max_workers=8, a side-effecting call made while 8 calls hang never runs: it is recorded as
    no_capacity (not possibly run), nothing is kept under its key, and the same call runs once capacity is back."""
    effects: list[str] = []
    with Dispatcher(_registry(release, effects), max_workers=8) as d:
        first = [d.dispatch("hang_write", {"n": i}, session_id="s") for i in range(8)]
        assert [(r.reason, r.trace.possibly_running) for r in first] == [("timeout", True)] * 8
        starved = d.dispatch("hang_write", {"n": 8}, session_id="s")
        assert (starved.status, starved.reason, starved.trace.possibly_running) == ("error", "no_capacity", False)
        assert effects == [f"hang_write {i}" for i in range(8)]
        release.set()
        _wait_until(lambda: d.metrics().extra["abandoned_threads"] == {})
        again = d.dispatch("hang_write", {"n": 8}, session_id="s")
        assert (again.status, again.reason, again.value) == ("ok", None, {"n": 8})
        assert effects == [f"hang_write {i}" for i in range(9)]


def test_fault12_many_hanging_calls_keep_the_thread_count_bounded(release: threading.Event) -> None:
    """Fault 12: one batch of 200 hanging read-only calls starts at most the tool's 8 workers, not 200 threads."""
    before = threading.active_count()
    with Dispatcher(_registry(release, []), max_workers=256) as d:
        results = d.dispatch_many([("hang", {"n": i}) for i in range(200)], session_id="s")
        assert threading.active_count() - before <= 8
        assert sum(r.reason == "timeout" for r in results) == 8
        assert sum(r.reason == "no_capacity" for r in results) == 192
        release.set()


def test_fault12_wait_for_a_worker_is_not_run_time(release: threading.Event) -> None:
    """Fault 12: with one worker, a call that waits 0.3 s for it, then runs 0.3 s of its 0.5 s timeout, succeeds;
    its tool latency counts from its invocation."""
    gate = threading.Event()
    reg = Registry()

    def slow(n: int) -> dict[str, int]:
        gate.wait(0.3)
        return {"n": n}

    reg.register("slow", slow, read_only=True, concurrency_safe=True, timeout_s=0.5, max_attempts=1)
    with Dispatcher(reg, max_workers=1) as d:
        results = d.dispatch_many([("slow", {"n": 0}), ("slow", {"n": 1})], session_id="s")
        assert [(r.status, r.value) for r in results] == [("ok", {"n": 0}), ("ok", {"n": 1})]
        assert results[1].trace.latencies["tool"] < results[1].trace.latencies["total"] - 0.2


def test_fault1_short_ttl_in_flight_record_outlives_the_call(release: threading.Event) -> None:
    """Fault 1: with idempotency_ttl_s=0.3 and a tool that runs 1 s, the same call dispatched 0.5 s after the
    first is a conflict (the in-flight record lives until the call can no longer be running): one side effect."""
    effects: list[int] = []
    reg = Registry()

    def slow_write(n: int) -> dict[str, int]:
        time.sleep(1.0)
        effects.append(n)
        return {"n": n}

    reg.register("slow_write", slow_write, read_only=False, idempotency_ttl_s=0.3, timeout_s=2)
    with Dispatcher(reg) as d:
        first: list[Any] = []
        runner = threading.Thread(target=lambda: first.append(d.dispatch("slow_write", {"n": 1}, session_id="s")))
        runner.start()
        time.sleep(0.5)
        second = d.dispatch("slow_write", {"n": 1}, session_id="s")
        runner.join()
        assert (second.status, second.reason) == ("rejected", "idempotency_conflict")
        assert (first[0].status, effects) == ("ok", [1])
