"""The store's behaviour on both stores: each test runs once on a SQLite file and once on PostgreSQL."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tooldispatch.dispatch import Dispatcher, ManualClock, Registry
from tooldispatch.dispatch.idempotency import IdempotencyStore, fingerprint, make_key
from tooldispatch.dispatch.saga import SagaJournal
from tooldispatch.dispatch.state import State
from tooldispatch.errors import ConfigError, ToolError
from tooldispatch.store import MIGRATIONS, StateStore, open_store, register_migration

pytestmark = pytest.mark.integration


@pytest.fixture
def store(store_target: str) -> Iterator[StateStore]:
    s = open_store(store_target)
    yield s
    s.close()


def _race(workers: int, fn: Callable[[int], Any]) -> list[Any]:
    """Run ``fn(i)`` on ``workers`` threads released at once; returns the results in thread order."""
    barrier = threading.Barrier(workers)
    results: list[Any] = [None] * workers
    errors: list[BaseException] = []

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = fn(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return results


def test_fresh_store_records_every_migration(store: StateStore) -> None:
    """A new store records each migration of this build by name, in order, and checks as up to date."""
    report = store.check()
    assert report.applied == [m.name for m in MIGRATIONS]
    assert report.pending == [] and report.newer == []
    assert report.ok
    assert report.dialect == store.dialect


def test_reopening_applies_nothing_again(store_target: str) -> None:
    """Opening a migrated store again leaves its migration record as it was."""
    first = open_store(store_target)
    applied = first.fetchall("SELECT name, applied_at FROM schema_migrations ORDER BY name")
    first.close()
    second = open_store(store_target)
    assert second.fetchall("SELECT name, applied_at FROM schema_migrations ORDER BY name") == applied
    second.close()


def test_appended_migration_applies_once_on_both(store_target: str) -> None:
    """A migration registered later is applied to an existing store, and its portable types work there."""
    open_store(store_target).close()
    register_migration("test_0001_extra", "CREATE TABLE IF NOT EXISTS test_extra (x INTEGER, r REAL, b BLOB);")
    try:
        store = open_store(store_target)
        assert "test_0001_extra" in store.check().applied
        store.execute("INSERT INTO test_extra VALUES (?, ?, ?)", (2**40, 1_700_000_000.123456, b"\x00\xff"))
        assert store.fetchall("SELECT x, r, b FROM test_extra") == [(2**40, 1_700_000_000.123456, b"\x00\xff")]
        store.close()
    finally:
        MIGRATIONS[:] = [m for m in MIGRATIONS if m.name != "test_0001_extra"]


def test_schema_newer_than_the_code_is_refused(store_target: str) -> None:
    """A store holding a core migration this build does not know is refused with the fix, untouched."""
    store = open_store(store_target)
    store.execute("INSERT INTO schema_migrations (name, applied_at) VALUES ('core_9999_future', 'x')")
    store.close()
    with pytest.raises(ConfigError) as caught:
        open_store(store_target)
    assert "has a schema newer than this tooldispatch (core_9999_future); upgrade tooldispatch here" in str(
        caught.value
    )
    with pytest.raises(ConfigError, match="newer than this tooldispatch"):
        open_store(store_target, readonly=True)


def test_transaction_rolls_back_and_nests(store: StateStore) -> None:
    """An exception inside transaction() leaves nothing written; a nested block and store calls join it."""
    with pytest.raises(RuntimeError), store.transaction() as conn:
        conn.execute("INSERT INTO freshness (session_id, resource, refreshed_at) VALUES (?, ?, ?)", ("s", "r", 1.0))
        with store.transaction() as inner:
            inner.execute(
                "INSERT INTO freshness (session_id, resource, refreshed_at) VALUES (?, ?, ?)", ("s", "q", 1.0)
            )
        store.execute("INSERT INTO freshness (session_id, resource, refreshed_at) VALUES (?, ?, ?)", ("s", "p", 1.0))
        assert store.fetchone("SELECT COUNT(*) FROM freshness") == (3,)
        raise RuntimeError("stop")
    assert store.fetchall("SELECT * FROM freshness") == []


def test_percent_signs_and_placeholders(store: StateStore) -> None:
    """``?`` placeholders work on both, and a ``%`` in a literal or a parameter is taken as written."""
    store.execute(
        "INSERT INTO bench_runs (id, kind, created_at, meta) VALUES (?, ?, ?, ?)", ("a%b", "100% ?", 1.0, "{}")
    )
    assert store.fetchall("SELECT kind FROM bench_runs WHERE id LIKE ? AND kind LIKE '100%'", ("a%",)) == [("100% ?",)]
    assert store.fetchall("SELECT '50%'") == [("50%",)]


def test_idempotency_claim_is_taken_once_across_workers(store_target: str) -> None:
    """Sixteen threads over two store instances claim one key at once: exactly one gets it."""
    stores = [open_store(store_target), open_store(store_target)]
    try:
        idems = [IdempotencyStore(s) for s in stores]
        results = _race(
            16,
            lambda i: idems[i % 2].claim(
                "k", session_id="s", tool="t", fp="f", trace_id=f"tr{i}", now=100.0, ttl_s=60.0
            ),
        )
        winners = [i for i, r in enumerate(results) if r is None]
        assert len(winners) == 1
        assert {r.trace_id for r in results if r is not None} == {f"tr{winners[0]}"}
        assert {r.state for r in results if r is not None} == {"in_flight"}
    finally:
        for s in stores:
            s.close()


def test_expired_record_is_taken_over_once(store: StateStore) -> None:
    """An expired record is replaced by one new claim; a live one is returned instead."""
    idem = IdempotencyStore(store)
    assert idem.claim("k", session_id="s", tool="t", fp="f", trace_id="a", now=100.0, ttl_s=10.0) is None
    live = idem.claim("k", session_id="s", tool="t", fp="f", trace_id="b", now=105.0, ttl_s=10.0)
    assert live is not None and live.trace_id == "a"
    assert idem.claim("k", session_id="s", tool="t", fp="f", trace_id="c", now=111.0, ttl_s=10.0) is None
    record = idem.lookup("k", 112.0)
    assert record is not None and (record.trace_id, record.state, record.expires_at) == ("c", "in_flight", 121.0)


def test_quota_never_exceeded_across_workers(store_target: str) -> None:
    """Twenty threads over two store instances take a quota of 5: exactly five succeed, the count stays 5."""
    stores = [open_store(store_target), open_store(store_target)]
    try:
        states = [State(s) for s in stores]
        results = _race(20, lambda i: states[i % 2].take_quota("assign", 'driver_id="d1"', 5))
        assert sorted(r for r in results if r is not None) == [0, 1, 2, 3, 4]
        assert results.count(None) == 15
        assert states[0].quota_used("assign", 'driver_id="d1"') == 5
    finally:
        for s in stores:
            s.close()


def test_approval_is_decided_once_across_workers(store_target: str) -> None:
    """Sixteen threads approve one pending approval at once: one decision is taken, the rest get None."""
    stores = [open_store(store_target), open_store(store_target)]
    try:
        states = [State(s) for s in stores]
        states[0].add_approval(
            "apr_1", session_id="s", tool="cancel", args={"o": 1}, trigger="model", trace_id="t", now=1.0
        )
        results = _race(16, lambda i: states[i % 2].decide_approval("apr_1", "approved", None, 2.0 + i))
        taken = [r for r in results if r is not None]
        assert len(taken) == 1
        assert taken[0].state == "approved"
        assert states[1].approval("apr_1") == taken[0]
    finally:
        for s in stores:
            s.close()


def test_freshness_stamp_only_moves_forward(store: StateStore) -> None:
    """A stamp older than the recorded one leaves it; a newer one replaces it."""
    state = State(store)
    state.stamp_fresh("s", "drivers", 200.0)
    state.stamp_fresh("s", "drivers", 150.0)
    assert state.refreshed_at("s", "drivers") == 200.0
    state.stamp_fresh("s", "drivers", 250.5)
    assert state.refreshed_at("s", "drivers") == 250.5


def test_saga_entries_get_increasing_ids(store: StateStore) -> None:
    """Each journal entry gets the next id, and pending() lists them newest first."""
    saga = SagaJournal(store)
    ids = [
        saga.record(
            session_id="s", trace_id=f"t{i}", tool="a", inverse_tool="b", args={}, idempotency_key=None, now=1.0
        )
        for i in range(3)
    ]
    assert ids == sorted(ids) and len(set(ids)) == 3
    assert [e.id for e in saga.pending("s")] == ids[::-1]
    assert saga.take(ids[0]) is True
    assert saga.take(ids[0]) is False


class _Effects:
    def __init__(self) -> None:
        self.count: Counter[str] = Counter()

    def charge(self, order_id: str) -> dict[str, Any]:
        self.count[order_id] += 1
        return {"charged": order_id}

    def look(self) -> dict[str, Any]:
        return {"ok": True}


def _registry(effects: _Effects) -> Registry:
    reg = Registry()
    reg.register(
        "charge",
        effects.charge,
        schema={"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
        read_only=False,
        destructive=False,
    )
    reg.register("look", effects.look, schema={"type": "object", "properties": {}}, read_only=True)
    return reg


def test_dispatcher_replays_and_orders_traces(store_target: str) -> None:
    """Through the dispatcher: a repeated side-effecting call replays, and traces keep insertion order."""
    effects, clock = _Effects(), ManualClock()
    with Dispatcher(_registry(effects), store=store_target, clock=clock) as d:
        first = d.dispatch("charge", {"order_id": "o1"}, session_id="s")
        again = d.dispatch("charge", {"order_id": "o1"}, session_id="s")
        looked = d.dispatch("look", {}, session_id="s")
        assert (first.status, again.status, looked.status) == ("ok", "ok", "ok")
        assert again.content == first.content
        assert effects.count == Counter({"o1": 1})
        assert [t.id for t in d.traces(session_id="s")] == [first.trace.id, again.trace.id, looked.trace.id]
        assert [t.id for t in d.traces(session_id="s", limit=2)] == [again.trace.id, looked.trace.id]


class _Holds:
    """One item that a hold takes and a release gives back; each refuses (409) when the item is not as it needs."""

    def __init__(self) -> None:
        self.held = False
        self.count: Counter[str] = Counter()

    def hold(self, item: str) -> dict[str, Any]:
        self.count["hold"] += 1
        if self.held:
            raise ToolError(f"{item} is already held", retryable=False, status=409)
        self.held = True
        return {"item": item, "held": True}

    def release(self, item: str) -> dict[str, Any]:
        self.count["release"] += 1
        if not self.held:
            raise ToolError(f"{item} is not held", retryable=False, status=409)
        self.held = False
        return {"item": item, "held": False}


def _holds_registry(holds: _Holds) -> Registry:
    schema = {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}
    reg = Registry()
    reg.register("release", holds.release, schema=schema, read_only=False)
    reg.register("hold", holds.hold, schema=schema, read_only=False, compensate="release")
    return reg


def test_undo_by_another_worker_ends_the_record_and_the_saga_entry(store_target: str) -> None:
    """Two workers on one store: b's release ends a's stored hold and its saga entry, so a's repeat runs again
    and a's rollback undoes only the hold that stands, on SQLite and on PostgreSQL alike."""
    holds = _Holds()
    with (
        Dispatcher(_holds_registry(holds), store=store_target) as a,
        Dispatcher(_holds_registry(holds), store=store_target) as b,
    ):
        first = a.dispatch("hold", {"item": "x"}, session_id="a")
        undo = b.dispatch("release", {"item": "x"}, session_id="b")
        assert undo.trace.extra["supersedes"] == [first.trace.id]
        again = a.dispatch("hold", {"item": "x"}, session_id="a")
        assert (again.status, again.reason, holds.held) == ("ok", None, True)
        assert [(e.state, e.compensation_trace_id) for e in a.saga("a")] == [
            ("compensated", undo.trace.id),
            ("pending", None),
        ]
        assert [(r.trace.tool, r.status) for r in a.rollback("a")] == [("release", "ok")]
    assert (holds.count, holds.held) == (Counter({"hold": 2, "release": 2}), False)


def test_records_from_before_core_0004_replay_and_roll_back(store_target: str) -> None:
    """A store written before core_0004_resource migrates on opening; its stored hold still replays, its saga
    entry still rolls back (releasing the key), and the hold then runs again."""
    holds = _Holds()
    tool = _holds_registry(holds)["hold"]
    args = {"item": "x"}
    key = make_key("a", tool, args)
    saved = MIGRATIONS[:]
    MIGRATIONS[:] = [m for m in saved if m.name != "core_0004_resource"]
    try:
        old = open_store(store_target)
        assert (
            IdempotencyStore(old).claim(
                key, session_id="a", tool="hold", fp=fingerprint(args), trace_id="t-old", now=time.time(), ttl_s=3600.0
            )
            is None
        )
        old.execute(
            "UPDATE idempotency SET state = 'completed', status = 'ok', content = ? WHERE key = ?",
            ('{"item": "x", "held": true}', key),
        )
        old.execute(
            "INSERT INTO saga (session_id, trace_id, tool, inverse_tool, inverse_args, idempotency_key, state, "
            "created_at) VALUES ('a', 't-old', 'hold', 'release', ?, ?, 'pending', ?)",
            ('{"item": "x"}', key, time.time()),
        )
        old.close()
    finally:
        MIGRATIONS[:] = saved
    holds.held = True  # the effect the old record describes
    with Dispatcher(_holds_registry(holds), store=store_target) as d:
        assert d.store.check().ok
        replay = d.dispatch("hold", args, session_id="a")
        assert (replay.status, replay.reason) == ("ok", "idempotent_replay")
        assert [(r.trace.tool, r.status) for r in d.rollback("a")] == [("release", "ok")]
        again = d.dispatch("hold", args, session_id="a")
        assert (again.status, again.reason, holds.held) == ("ok", None, True)
    assert holds.count == Counter({"hold": 1, "release": 1})


def test_in_flight_record_of_a_dead_worker_is_outcome_unknown(store_target: str) -> None:
    """A claim committed by a worker that died before completing makes another worker refuse the call."""
    effects = _Effects()
    reg = _registry(effects)
    tool = reg.get("charge")
    assert tool is not None
    args = {"order_id": "o9"}
    dead = open_store(store_target)  # the worker that dies: its in-flight record is committed, nothing more
    claimed = IdempotencyStore(dead).claim(
        make_key("w", tool, args),
        session_id="w",
        tool="charge",
        fp=fingerprint(args),
        trace_id="dead",
        now=time.time(),
        ttl_s=3600.0,
    )
    assert claimed is None
    dead.close()
    with Dispatcher(_registry(effects), store=store_target) as survivor:
        result = survivor.dispatch("charge", args, session_id="w")
    assert (result.status, result.reason) == ("rejected", "idempotency_conflict")
    assert (
        "(trace dead) and has not finished; if the process stopped mid-call, its outcome is unknown" in result.content
    )
    assert effects.count == Counter()
