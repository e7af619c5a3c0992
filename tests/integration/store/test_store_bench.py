"""``bench dispatch --store``: the comparison runs on both stores and leaves no rows behind (no timings checked)."""

from __future__ import annotations

import pytest

from tooldispatch.bench.store_bench import run_store_bench
from tooldispatch.store import open_store

pytestmark = pytest.mark.integration


def test_store_bench_measures_sqlite_and_both_postgres_durabilities(pg_url: str) -> None:
    """One run gives SQLite, PostgreSQL as configured and with synchronous_commit=off, and cleans up after itself."""
    figures = run_store_bench(pg_url, iterations=20, workers=(1, 2), calls_per_worker=10)
    assert [(f.dialect, f.durability) for f in figures] == [
        ("sqlite", "WAL, synchronous=NORMAL: survives process crashes"),
        ("postgresql", "claims wait for the disk"),
        ("postgresql", "synchronous_commit=off: survives worker crashes, as SQLite NORMAL"),
    ]
    assert all(f.n == 20 and f.median_us > 0 and sorted(f.calls_per_s) == [1, 2] for f in figures)
    store = open_store(pg_url)
    assert store.fetchall("SELECT COUNT(*) FROM idempotency") == [(0,)]
    assert store.fetchall("SELECT COUNT(*) FROM traces") == [(0,)]
    store.close()
