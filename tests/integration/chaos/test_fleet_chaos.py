"""Four worker processes share one PostgreSQL store; one of them is SIGKILLed mid-call 50 times and restarted."""

from __future__ import annotations

import multiprocessing
import os
import random
import select
import signal
import time
from collections import Counter
from pathlib import Path

import pytest
from _fleet import DRIVERS, EFFECTS_DDL, QUOTA, _Tools, calls_at, registry, work

from tooldispatch.dispatch import Dispatcher, Registry
from tooldispatch.store import open_store

pytestmark = pytest.mark.integration
psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed (pip install -e '.[dev]' installs it)")

KILLS = 50
STEPS = 1_000_000  # never reached: the workers keep meeting new calls until told to stop
AHEAD = 20  # a restarted worker starts this many steps past the others: its first calls are new ones, which
# the others then meet in flight (or done) when they get there
FORK = multiprocessing.get_context("fork")


def _front(url: str) -> int:
    """The highest step any worker has charged so far (where a restarted worker joins the others)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT MAX(CAST(SUBSTRING(key FROM 3) AS INTEGER)) FROM effects").fetchone()
    return int(row[0]) if row and row[0] is not None else 0


def test_fleet_sigkill_mid_call_never_duplicates(pg_url: str, tmp_path: Path) -> None:
    """50 SIGKILLs mid-call among 4 workers: no duplicate side effect, approvals granted once, quotas kept."""
    open_store(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(EFFECTS_DDL)
    stop_file = tmp_path / "stop"
    steady = [
        FORK.Process(target=work, args=(pg_url, f"w{i}", 0, STEPS, stop_file, tmp_path / f"grants-w{i}", None))
        for i in range(1, 4)
    ]
    for p in steady:
        p.start()
    rng = random.Random(7)
    kills = 0
    starts: list[int] = []
    deadline = time.monotonic() + 90
    try:
        while kills < KILLS:
            assert time.monotonic() < deadline, f"only {kills} kills in 90 s"
            read_fd, write_fd = os.pipe()
            starts.append(_front(pg_url) + AHEAD)
            victim = FORK.Process(
                target=work,
                args=(pg_url, f"v{kills}", starts[-1], STEPS, stop_file, tmp_path / f"grants-v{kills}", write_fd),
            )
            victim.start()
            os.close(write_fd)
            ready, _, _ = select.select([read_fd], [], [], 30)
            assert ready, f"restart {kills}: no tool invoked within 30 s (exit code {victim.exitcode})"
            time.sleep(rng.uniform(0, 0.012))
            os.kill(victim.pid or 0, signal.SIGKILL)
            victim.join(10)
            os.close(read_fd)
            assert victim.exitcode == -signal.SIGKILL
            kills += 1
    finally:
        stop_file.touch()
        for p in steady:
            p.join(30)
            if p.is_alive():
                p.kill()
    assert [p.exitcode for p in steady] == [0, 0, 0]
    # the restart after the storm: one more worker repeats the steps the killed workers began at (and those
    # right after), and a sample of the rest; nothing may run again. Then the tally of every effect.
    done = min(int(f.read_text().split("done ")[1]) for f in tmp_path.glob("grants-w*"))
    steps = sorted(
        {n + d for n in starts for d in range(4) if n + d < done} | set(rng.sample(range(done), min(150, done)))
    )
    with psycopg.connect(pg_url, autocommit=True) as conn:
        before = conn.execute("SELECT COUNT(*) FROM effects").fetchone()
    with Dispatcher(_checker_registry(pg_url), store=pg_url) as last:
        outcomes = Counter(
            (r.status, r.reason)
            for n in steps
            for name, args in calls_at(n)
            for r in [last.dispatch(name, args, session_id="fleet")]
        )
    with psycopg.connect(pg_url, autocommit=True) as conn:
        effects = conn.execute("SELECT tool, key, driver FROM effects").fetchall()
        quota_rows = conn.execute("SELECT scope, count FROM quota_usage").fetchall()
        approved = conn.execute("SELECT COUNT(*) FROM approvals WHERE state = 'approved'").fetchone()
    assert (len(effects),) == before, "the last worker re-ran calls that had run"
    per_call = Counter((tool, key) for tool, key, _ in effects)
    assert [c for c, k in per_call.items() if k > 1] == []
    per_driver = Counter(driver for tool, _, driver in effects if tool == "assign")
    assert max(per_driver.values()) <= QUOTA and len(per_driver) <= DRIVERS
    assert all(count <= QUOTA for _, count in quota_rows)
    grants = Counter(
        line for f in tmp_path.glob("grants-*") for line in f.read_text().splitlines() if line.startswith("apr_")
    )
    assert grants and max(grants.values()) == 1
    assert approved is not None and approved[0] >= len(grants)
    assert set(outcomes) <= {
        ("ok", "idempotent_replay"),
        ("rejected", "idempotency_conflict"),
        ("rejected", "quota_exceeded"),
        ("awaiting_approval", "awaiting_approval"),
    }, outcomes
    assert outcomes[("ok", "idempotent_replay")] > 0 and outcomes[("rejected", "quota_exceeded")] > 0
    assert outcomes[("rejected", "idempotency_conflict")] > 0  # calls the killed workers left in flight
    assert kills == KILLS


def _checker_registry(url: str) -> Registry:
    """The fleet's tools for the last worker: any call it runs again would show as a second effect."""
    return registry(_Tools(url, "checker", None, random.Random(0)))
