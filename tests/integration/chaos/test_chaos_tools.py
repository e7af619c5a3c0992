"""Misbehaving tools: each failure comes back to the caller, and side effects never run twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _chaos_tools import Rig, no_sleep, process_crash, process_hang

from tooldispatch.dispatch import Dispatcher, DispatchResult, Registry
from tooldispatch.tools.demo import DemoWorld

pytestmark = pytest.mark.integration

ENVELOPE_KEYS = {"error", "tool", "message", "recoverable", "attempts", "retried", "suggestion"}


def envelope(result: DispatchResult) -> dict[str, object]:
    data = json.loads(result.content)
    assert set(data) == ENVELOPE_KEYS
    assert data["error"] == result.reason
    return dict(data)


def test_hanging_side_effect_times_out_once(rig: Rig) -> None:
    """A side-effecting tool that hangs after its effect times out, is not retried, and is never re-run."""
    d = rig.dispatcher
    first = d.dispatch("hang_after_effect", {"key": "k1"}, session_id="s")
    assert (first.status, first.reason) == ("error", "timeout")
    env = envelope(first)
    assert env["recoverable"] is False
    assert env["attempts"] == 1
    assert env["retried"] is False
    assert env["suggestion"] == (
        "the action may or may not have happened; check the state with a read-only tool before doing anything else"
    )
    assert first.trace.possibly_running is True
    again = d.dispatch("hang_after_effect", {"key": "k1"}, session_id="s")
    assert (again.status, again.reason) == ("rejected", "idempotency_conflict")
    rig.chaos.release.set()
    assert rig.chaos.calls["hang_after_effect"] == 1
    assert rig.world.count_effects("hang_after_effect", "k1") == 1


def test_hanging_read_only_retried_until_attempts_run_out(rig: Rig) -> None:
    """A read-only tool that hangs is retried up to max_attempts, then reported as a timeout."""
    result = rig.dispatcher.dispatch("hang_read", {"key": "k"}, session_id="s")
    assert (result.status, result.reason) == ("error", "timeout")
    env = envelope(result)
    assert (env["attempts"], env["retried"], env["recoverable"]) == (3, True, True)
    assert rig.chaos.calls["hang_read"] == 3


def test_hanging_async_tool_is_cancelled(rig: Rig) -> None:
    """An async tool past its deadline is cancelled, so it is not reported as possibly still running."""
    result = rig.dispatcher.dispatch("hang_async", {"key": "k"}, session_id="s")
    assert (result.status, result.reason) == ("error", "timeout")
    assert result.trace.possibly_running is False
    assert result.trace.attempts == 1


def test_crash_of_side_effecting_tool_not_retried(rig: Rig) -> None:
    """An unexpected exception in a side-effecting tool is wrapped, reported, not retried and replayed later."""
    result = rig.dispatcher.dispatch("crash", {"key": "k"}, session_id="s")
    assert (result.status, result.reason) == ("error", "exception")
    env = envelope(result)
    assert env["message"] == "crash raised an unexpected error: RuntimeError: segfault-like crash while handling k"
    assert (env["attempts"], env["recoverable"]) == (1, False)
    replay = rig.dispatcher.dispatch("crash", {"key": "k"}, session_id="s")
    assert (replay.status, replay.reason) == ("error", "idempotent_replay")
    assert replay.content == result.content
    assert rig.chaos.calls["crash"] == 1


def test_crash_of_read_only_tool_retried(rig: Rig) -> None:
    """A read-only tool that keeps crashing is retried up to max_attempts and then reported."""
    result = rig.dispatcher.dispatch("crash_read", {"key": "k"}, session_id="s")
    assert (result.status, result.reason, result.trace.attempts) == ("error", "exception", 3)
    assert rig.chaos.calls["crash"] == 3


def test_flaky_read_recovers_within_attempts(rig: Rig) -> None:
    """A read-only tool failing twice then answering succeeds on the third attempt."""
    result = rig.dispatcher.dispatch("flaky_read", {"key": "k"}, session_id="s")
    assert (result.status, result.trace.attempts, result.trace.retried) == ("ok", 3, True)
    assert json.loads(result.content) == {"key": "k", "value": 42}


def test_flaky_read_out_of_attempts(rig: Rig) -> None:
    """With fewer attempts than failures, the transient error is reported after the last attempt."""
    result = rig.dispatcher.dispatch("flaky_read_short", {"key": "k"}, session_id="s")
    assert (result.status, result.reason) == ("error", "tool_error")
    env = envelope(result)
    assert env["message"] == "flaky_read_short failed: service busy (status 503) (after 2 attempts)"
    assert (env["attempts"], env["retried"], env["recoverable"]) == (2, True, True)


def test_refused_before_execution_is_retried_and_writes_once(rig: Rig) -> None:
    """Connection refused (nothing ran) is retried for a side-effecting tool; the write happens exactly once."""
    result = rig.dispatcher.dispatch("refused_then_write", {"key": "k"}, session_id="s")
    assert (result.status, result.trace.attempts) == ("ok", 3)
    assert rig.world.count_effects("refused_then_write", "k") == 1
    replay = rig.dispatcher.dispatch("refused_then_write", {"key": "k"}, session_id="s")
    assert (replay.status, replay.reason) == ("ok", "idempotent_replay")
    assert rig.world.count_effects("refused_then_write", "k") == 1
    assert rig.chaos.calls["refused_then_write"] == 3


def test_flaky_write_during_execution_never_retried(rig: Rig) -> None:
    """A transient failure during a side-effecting call is not retried, and a re-call replays the failure."""
    result = rig.dispatcher.dispatch("flaky_write", {"key": "k"}, session_id="s")
    assert (result.status, result.reason, result.trace.attempts) == ("error", "tool_error", 1)
    env = envelope(result)
    assert env["recoverable"] is False
    assert env["suggestion"] == "the action may or may not have happened; check the state before doing anything else"
    again = rig.dispatcher.dispatch("flaky_write", {"key": "k"}, session_id="s")
    assert (again.status, again.reason) == ("error", "idempotent_replay")
    assert rig.chaos.calls["flaky_write"] == 1


def test_raise_after_side_effect(rig: Rig) -> None:
    """A tool that fails after its side effect is reported as uncertain and never runs the effect again."""
    d = rig.dispatcher
    results = [d.dispatch("effect_then_raise", {"key": "k"}, session_id="s") for _ in range(3)]
    assert [(r.status, r.reason) for r in results] == [
        ("error", "exception"),
        ("error", "idempotent_replay"),
        ("error", "idempotent_replay"),
    ]
    assert envelope(results[0])["recoverable"] is False
    assert rig.world.count_effects("effect_then_raise", "k") == 1
    assert rig.chaos.calls["effect_then_raise"] == 1


def test_five_megabyte_result_bounded_and_kept(rig: Rig) -> None:
    """A 5 MB result reaches the model cut to the limit, with a marker, and the full text stays in the store."""
    result = rig.dispatcher.dispatch("huge", {"key": "k"}, session_id="s")
    full_len = len(json.dumps({"key": "k", "blob": "x" * 5_000_000}))
    assert result.status == "ok"
    assert len(result.content) == 2000
    assert result.trace.bounded_chars > 0
    assert f"characters omitted; full result: trace {result.trace.id}]" in result.content
    assert result.content.startswith('{"key": "k", "blob": "xxx')
    assert result.content.endswith('xxx"}')
    full = rig.dispatcher.full_result(result.trace.id)
    assert full is not None
    assert len(full) == full_len
    marker = f"…[{result.trace.bounded_chars} characters omitted; full result: trace {result.trace.id}]…"
    assert result.trace.bounded_chars == full_len - 2000 + len(marker)
    assert result.content.count(marker) == 1


def test_non_json_result_of_side_effecting_tool(rig: Rig) -> None:
    """A non-JSON result is reported as invalid_result; its side effect is not repeated by a re-call."""
    d = rig.dispatcher
    first = d.dispatch("not_json", {"key": "k"}, session_id="s")
    assert (first.status, first.reason) == ("error", "invalid_result")
    env = envelope(first)
    assert env["message"] == (
        "not_json returned a value that is not JSON: dict is not JSON-serializable "
        "(Object of type object is not JSON serializable)"
    )
    assert env["recoverable"] is False
    again = d.dispatch("not_json", {"key": "k"}, session_id="s")
    assert (again.status, again.reason) == ("error", "idempotent_replay")
    assert rig.world.count_effects("not_json", "k") == 1


def test_nan_result_is_not_json(rig: Rig) -> None:
    """NaN is refused as a result instead of producing invalid JSON for the model."""
    result = rig.dispatcher.dispatch("nan_read", {"key": "k"}, session_id="s")
    assert (result.status, result.reason, result.trace.attempts) == ("error", "invalid_result", 1)


def test_process_isolated_hang_is_killed(tmp_path: Path) -> None:
    """A process-isolated tool past its deadline is killed: not possibly running, and never re-run."""
    world_path = tmp_path / "world.db"
    world = DemoWorld.seed(world_path)
    reg = Registry()
    reg.register("process_hang", process_hang, read_only=False, isolation="process", timeout_s=2.0)
    reg.register("process_crash", process_crash, read_only=False, isolation="process", timeout_s=30.0)
    d = Dispatcher(reg, store=tmp_path / "state.db", sleep=no_sleep)
    try:
        args = {"world": str(world_path), "key": "k"}
        hung = d.dispatch("process_hang", args, session_id="s")
        assert (hung.status, hung.reason, hung.trace.possibly_running) == ("error", "timeout", False)
        assert world.count_effects("process_hang", "k") == 1
        again = d.dispatch("process_hang", args, session_id="s")
        assert (again.status, again.reason) == ("rejected", "idempotency_conflict")
        crashed = d.dispatch("process_crash", args, session_id="s")
        assert (crashed.status, crashed.reason, crashed.trace.attempts) == ("error", "exception", 1)
        assert envelope(crashed)["message"] == "process_crash crashed: the tool's process exited with code 3 mid-call"
        again = d.dispatch("process_crash", args, session_id="s")
        assert (again.status, again.reason) == ("rejected", "idempotency_conflict")
        assert world.count_effects("process_crash", "k") == 1
    finally:
        d.close()
