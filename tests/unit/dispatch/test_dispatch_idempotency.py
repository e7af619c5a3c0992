"""Idempotency of side-effecting tools: replay, conflict, mismatch, what is not stored, TTL."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from tooldispatch.dispatch import Dispatcher, ManualClock, Registry
from tooldispatch.dispatch.idempotency import IdempotencyStore, fingerprint, make_key
from tooldispatch.errors import ToolError

from .conftest import World, build_registry, no_sleep

MSG = {"to": "ana@example.com", "subject": "eta", "body": "10 min"}


def test_replay_returns_stored_result_without_running(dispatcher: Dispatcher, world: World) -> None:
    """The same side-effecting call twice runs the tool once; the second is an idempotent replay."""
    first = dispatcher.dispatch("send_message", MSG, session_id="s1")
    second = dispatcher.dispatch("send_message", MSG, session_id="s1")
    assert (first.status, first.reason) == ("ok", None)
    assert (second.status, second.reason) == ("ok", "idempotent_replay")
    assert second.content == first.content == '{"sent": 1, "to": "ana@example.com"}'
    assert second.trace.attempts == 0
    assert second.trace.extra == {"replay_of": first.trace.id}
    assert world.calls["send_message"] == 1


def test_keys_are_per_session(dispatcher: Dispatcher, world: World) -> None:
    """The same call in another session is a different key and runs."""
    dispatcher.dispatch("send_message", MSG, session_id="s1")
    dispatcher.dispatch("send_message", MSG, session_id="s2")
    assert world.calls["send_message"] == 2


def test_same_identifying_fields_different_arguments_is_an_error(dispatcher: Dispatcher, world: World) -> None:
    """Same key (to, subject) with a different body is rejected as idempotency_mismatch."""
    dispatcher.dispatch("send_message", MSG, session_id="s1")
    r = dispatcher.dispatch("send_message", {**MSG, "body": "20 min"}, session_id="s1")
    assert (r.status, r.reason) == ("rejected", "idempotency_mismatch")
    assert json.loads(r.content)["recoverable"] is True
    assert world.calls["send_message"] == 1


def test_key_in_flight_is_a_conflict(dispatcher: Dispatcher, world: World, clock: ManualClock) -> None:
    """A call whose twin is still running is rejected as idempotency_conflict and does not run."""
    tool = dispatcher.registry["send_message"]
    key = make_key("s1", tool, MSG)
    IdempotencyStore(dispatcher.store).claim(
        key,
        session_id="s1",
        tool="send_message",
        fp=fingerprint(MSG),
        trace_id="t-running",
        now=clock.time(),
        ttl_s=3600,
    )
    r = dispatcher.dispatch("send_message", MSG, session_id="s1")
    assert (r.status, r.reason) == ("rejected", "idempotency_conflict")
    assert json.loads(r.content)["message"] == (
        "the same send_message call started earlier (trace t-running) and has not finished; if the process "
        "stopped mid-call, its outcome is unknown"
    )
    assert world.calls["send_message"] == 0


def test_concurrent_twins_run_once(world: World) -> None:
    """Two threads sending the same call at once: the tool runs once, the other gets a conflict or replay."""
    gate = threading.Event()
    runs: list[int] = []

    def slow_send(to: str, subject: str, body: str) -> dict[str, str]:
        runs.append(1)
        gate.wait(5)
        return {"to": to}

    reg = Registry()
    reg.register("send", slow_send, read_only=False)
    d = Dispatcher(reg)
    results: list[str | None] = []
    first = threading.Thread(target=lambda: results.append(d.dispatch("send", MSG).reason))
    first.start()
    while not runs:
        threading.Event().wait(0.001)
    results.append(d.dispatch("send", MSG).reason)
    gate.set()
    first.join()
    assert results == ["idempotency_conflict", None]
    assert runs == [1]


def test_failure_before_execution_is_not_stored(world: World) -> None:
    """A call that failed before execution (connection refused) is not stored: the next call runs."""
    attempts: list[int] = []

    def send(to: str) -> dict[str, str]:
        attempts.append(1)
        if len(attempts) <= 2:
            raise ConnectionRefusedError("smtp down")
        return {"to": to}

    reg = Registry()
    reg.register("send", send, read_only=False, max_attempts=2)
    d = Dispatcher(reg, sleep=no_sleep)
    r = d.dispatch("send", {"to": "x"})
    assert (r.status, r.reason, r.trace.attempts, r.trace.retried) == ("error", "tool_error", 2, True)
    assert d.dispatch("send", {"to": "x"}).ok
    assert len(attempts) == 3


def test_permanent_refusal_is_not_stored() -> None:
    """A 404 from the tool means nothing happened: not stored, the next identical call runs."""
    runs: list[int] = []

    def send(to: str) -> dict[str, str]:
        runs.append(1)
        raise ToolError("no such recipient", status=404)

    reg = Registry()
    reg.register("send", send, read_only=False)
    d = Dispatcher(reg)
    assert [d.dispatch("send", {"to": "x"}).reason for _ in range(2)] == ["tool_error", "tool_error"]
    assert runs == [1, 1]


def test_failure_during_execution_is_replayed() -> None:
    """An exception after execution began is stored and replayed: the side effect is never re-run."""
    runs: list[int] = []

    def send(to: str) -> dict[str, str]:
        runs.append(1)
        raise RuntimeError("crashed after sending")

    reg = Registry()
    reg.register("send", send, read_only=False)
    d = Dispatcher(reg)
    first, second = d.dispatch("send", {"to": "x"}), d.dispatch("send", {"to": "x"})
    assert (first.status, first.reason) == ("error", "exception")
    assert (second.status, second.reason) == ("error", "idempotent_replay")
    assert second.content == first.content
    assert runs == [1]


def test_ttl_expiry_lets_the_call_run_again(world: World, clock: ManualClock) -> None:
    """After idempotency_ttl_s the record expires and the same call runs again."""
    reg = build_registry(world)
    d = Dispatcher(reg, clock=clock)
    d.dispatch("send_message", MSG, session_id="s1")
    clock.advance(3599)
    assert d.dispatch("send_message", MSG, session_id="s1").reason == "idempotent_replay"
    clock.advance(1)
    assert d.dispatch("send_message", MSG, session_id="s1").reason is None
    assert world.calls["send_message"] == 2


def test_read_only_tools_are_not_deduplicated(dispatcher: Dispatcher, world: World) -> None:
    """Read-only calls always run: they have no idempotency key."""
    r1 = dispatcher.dispatch("refresh_drivers", {}, session_id="s1")
    dispatcher.dispatch("refresh_drivers", {}, session_id="s1")
    assert r1.trace.idempotency_key is None
    assert world.calls["refresh_drivers"] == 2


def test_in_flight_record_survives_a_restart(tmp_path: Path, world: World, clock: ManualClock) -> None:
    """An in-flight record left by a process that died is a conflict for a new Dispatcher on the same file."""
    db = tmp_path / "state.db"
    first = Dispatcher(build_registry(world), store=db, clock=clock)
    key = make_key("s1", first.registry["send_message"], MSG)
    IdempotencyStore(first.store).claim(
        key,
        session_id="s1",
        tool="send_message",
        fp=fingerprint(MSG),
        trace_id="t-dead",
        now=clock.time(),
        ttl_s=3600,
    )
    first.close()
    second = Dispatcher(build_registry(world), store=db, clock=clock)
    r = second.dispatch("send_message", MSG, session_id="s1")
    assert (r.status, r.reason) == ("rejected", "idempotency_conflict")
    assert world.calls["send_message"] == 0
    second.close()
