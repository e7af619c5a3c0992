"""``tooldispatch bench dispatch --store URL``: the durable side-effecting call on each store, side by side.

For a SQLite file in a temporary folder and for the store given (a PostgreSQL URL, usually), in one run;
a PostgreSQL store is measured twice: as the URL says (the in-flight claim waits for the server's disk, by
default), and with ``synchronous_commit=off`` (every commit survives any worker's crash, as a SQLite file
with ``synchronous=NORMAL`` does, but not a crash of the database host):

1. latency: individually timed dispatches of a no-op side-effecting tool with fresh arguments, so each call
   commits its in-flight record before the tool runs, then its result and its trace (median and p95);
2. throughput: 1, 4 and 16 worker processes (each its own ``Dispatcher`` on the store, as a fleet runs),
   released together, each dispatching its own calls; calls/s over the span from the first start to the
   last end.

The rows the run writes to a shared store (its sessions' idempotency records and traces) are deleted after.
"""

from __future__ import annotations

import multiprocessing
import statistics
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tooldispatch.dispatch import Dispatcher, Registry
from tooldispatch.store import open_store
from tooldispatch.store.url import is_postgres

POSTGRES_TARGET_US = 5000.0
"""Target for the median durable side-effecting call on PostgreSQL over loopback."""


@dataclass(frozen=True, slots=True)
class StoreFigures:
    """One store's figures.

    Attributes:
        store: the store, as shown (no password).
        dialect: ``sqlite`` or ``postgresql``.
        durability: what a committed write survives, in words.
        n: timed calls.
        median_us: median durable side-effecting call.
        p95_us: its 95th percentile.
        calls_per_s: workers → calls per second.
    """

    store: str
    dialect: str
    durability: str
    n: int
    median_us: float
    p95_us: float
    calls_per_s: dict[int, float] = field(default_factory=dict)


def record(item: int) -> dict[str, Any]:
    """Pretend to write ``item`` somewhere and return it."""
    return {"item": item}


def _registry() -> Registry:
    reg = Registry()
    reg.register("record", record, read_only=False, destructive=False, source="bench", version="1")
    return reg


def _dispatch_ok(dispatcher: Dispatcher, item: int, session: str) -> None:
    result = dispatcher.dispatch("record", {"item": item}, session_id=session)
    if result.status != "ok":
        raise RuntimeError(f"bench call did not succeed: {result.status} {result.reason}: {result.content}")


def _worker(target: str, session: str, calls: int, barrier: Any, out: Any) -> None:
    with Dispatcher(_registry(), store=target) as dispatcher:
        _dispatch_ok(dispatcher, -1, f"{session}-warm")
        barrier.wait()
        start = time.perf_counter()
        for i in range(calls):
            _dispatch_ok(dispatcher, i, session)
        out.put((start, time.perf_counter()))


def _throughput(target: str, run: str, workers: int, calls: int) -> float:
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(workers)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(target, f"{run}-w{workers}-{w}", calls, barrier, out)) for w in range(workers)
    ]
    for p in procs:
        p.start()
    spans = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
        if p.exitcode != 0:
            raise RuntimeError(f"a bench worker exited with {p.exitcode}")
    first: float = min(s for s, _ in spans)
    last: float = max(e for _, e in spans)
    return round(workers * calls / (last - first), 1)


def _measure(
    target: str, durability: str, run: str, iterations: int, workers: Sequence[int], calls: int
) -> StoreFigures:
    store = open_store(target)
    shown, dialect = store.target, store.dialect
    with Dispatcher(_registry(), store=store) as dispatcher:
        for i in range(max(20, iterations // 10)):
            _dispatch_ok(dispatcher, -1 - i, f"{run}-warm")
        samples = []
        for i in range(iterations):
            start = time.perf_counter_ns()
            _dispatch_ok(dispatcher, i, f"{run}-lat")
            samples.append((time.perf_counter_ns() - start) / 1000.0)
    samples.sort()
    rates = {w: _throughput(target, run, w, calls) for w in workers}
    cleanup = open_store(target)
    try:
        for table in ("idempotency", "traces"):
            cleanup.execute(f"DELETE FROM {table} WHERE session_id LIKE ?", (f"{run}-%",))
    finally:
        cleanup.close()
    p95 = samples[min(len(samples) - 1, round(0.95 * (len(samples) - 1)))]
    median = round(statistics.median(samples), 1)
    return StoreFigures(shown, dialect, durability, iterations, median, round(p95, 1), rates)


def run_store_bench(
    target: str, *, iterations: int = 500, workers: Sequence[int] = (1, 4, 16), calls_per_worker: int = 200
) -> list[StoreFigures]:
    """Measure a SQLite file and ``target`` side by side (see the module docstring).

    Args:
        target: the store to compare with SQLite (a ``postgresql://`` URL, or another SQLite path).
        iterations: individually timed calls per store.
        workers: the worker-process counts for the throughput runs.
        calls_per_worker: calls each worker makes in a throughput run.

    Returns:
        The SQLite figures, then the target's (twice for PostgreSQL, see the module docstring).
    """
    run = f"bench-{uuid.uuid4().hex[:8]}"
    label = "as configured"
    if is_postgres(target):
        label = "as the URL sets synchronous_commit" if "synchronous_commit" in target else "claims wait for the disk"
    cases = [(target, label)]
    if is_postgres(target) and "synchronous_commit" not in target:
        relaxed = target + ("&" if "?" in target else "?") + "options=-c%20synchronous_commit%3Doff"
        cases.append((relaxed, "synchronous_commit=off: survives worker crashes, as SQLite NORMAL"))
    with tempfile.TemporaryDirectory(prefix="tooldispatch-bench-") as tmp:
        sqlite = str(Path(tmp) / "state.db")
        figures = [
            _measure(
                sqlite, "WAL, synchronous=NORMAL: survives process crashes", run, iterations, workers, calls_per_worker
            )
        ]
        figures += [_measure(t, d, run, iterations, workers, calls_per_worker) for t, d in cases]
    return figures


def to_dicts(figures: list[StoreFigures]) -> list[dict[str, Any]]:
    """JSON-ready figures."""
    return [asdict(f) for f in figures]
