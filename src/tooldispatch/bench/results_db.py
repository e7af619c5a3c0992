"""A run's results in SQLite (``RUN_DIR/bench.db``): one row per (cell, case, seed), written as each output lands.

A rerun of the same command opens the same file and skips every (cell, case, seed) already stored, so an
interrupted run resumes exactly where it stopped. Requests that failed for good are not stored; they run
again next time. The folder is the run: its rows carry the name it had when they were first written, and a
folder moved or renamed keeps that name, so it still resumes and reports all of its results.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from tooldispatch.bench.corpus import OutputRecord
from tooldispatch.errors import ConfigError
from tooldispatch.store import register_migration
from tooldispatch.store.sqlite import Store

DB_NAME = "bench.db"

register_migration(
    "bench_0001_outputs",
    """
CREATE TABLE IF NOT EXISTS bench_outputs (
    run_id TEXT NOT NULL,
    cell TEXT NOT NULL,
    case_id TEXT NOT NULL,
    seed INTEGER NOT NULL,
    created_at REAL NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, cell, case_id, seed)
);
""",
)


class ResultsDB:
    """The results of the runs kept in one run folder.

    Args:
        run_dir: the run folder; ``bench.db`` is created in it.

    Attributes:
        run_id: the run's name: the one its results are stored under, or the folder's name for a new run.

    Raises:
        ConfigError: the file holds results under several names (a folder renamed between runs by a version that
            named the run after the folder each time).
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self._store = Store(run_dir / DB_NAME)
        names = sorted(
            str(row[0])
            for row in self._store.fetchall("SELECT run_id FROM bench_outputs UNION SELECT id FROM bench_runs")
        )
        if len(names) > 1:
            path = run_dir / DB_NAME
            self._store.close()
            raise ConfigError(
                f"{path} holds results under several run names ({', '.join(names)}): the folder was renamed between "
                f"runs by an earlier version. Merge them under one name, then rerun: sqlite3 {path} "
                f"\"UPDATE OR REPLACE bench_outputs SET run_id = '{names[0]}'; DELETE FROM bench_runs WHERE id != "
                f"'{names[0]}'\""
            )
        self.run_id = names[0] if names else run_dir.name

    def record_meta(self, kind: str, meta: Mapping[str, Any]) -> None:
        """Store (or replace) what the run was asked to do."""
        self._store.execute(
            "INSERT OR REPLACE INTO bench_runs (id, kind, created_at, meta) VALUES (?, ?, ?, ?)",
            (self.run_id, kind, time.time(), json.dumps(dict(meta), sort_keys=True, default=str)),
        )

    def meta(self) -> dict[str, Any]:
        """What the run was asked to do (empty when never recorded)."""
        row = self._store.fetchone("SELECT meta FROM bench_runs WHERE id = ?", (self.run_id,))
        return dict(json.loads(row[0])) if row else {}

    def done(self) -> set[tuple[str, str, int]]:
        """Every (cell, case_id, seed) already stored."""
        rows = self._store.fetchall("SELECT cell, case_id, seed FROM bench_outputs WHERE run_id = ?", (self.run_id,))
        return {(str(c), str(i), int(s)) for c, i, s in rows}

    def add(self, record: OutputRecord) -> None:
        """Store one output (a second store of the same key replaces the first)."""
        self._store.execute(
            "INSERT OR REPLACE INTO bench_outputs (run_id, cell, case_id, seed, created_at, data)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (
                self.run_id,
                record.cell,
                record.case_id,
                record.seed,
                time.time(),
                json.dumps(record.to_dict(), ensure_ascii=False, sort_keys=True),
            ),
        )

    def records(self) -> Iterator[OutputRecord]:
        """Every stored output, in the order it was stored."""
        rows = self._store.fetchall(
            "SELECT data FROM bench_outputs WHERE run_id = ? ORDER BY created_at, rowid", (self.run_id,)
        )
        for (data,) in rows:
            yield OutputRecord.from_dict(json.loads(data))

    def count(self) -> int:
        """How many outputs are stored."""
        row = self._store.fetchone("SELECT COUNT(*) FROM bench_outputs WHERE run_id = ?", (self.run_id,))
        return int(row[0]) if row else 0

    def close(self) -> None:
        """Close the database."""
        self._store.close()
