"""The SQLite store: one file, WAL mode, migrations, safe to share between threads.

One connection is shared by every thread behind a re-entrant lock: SQLite serializes writers anyway,
and one connection keeps ``":memory:"`` databases whole. Statements run in autocommit mode; a
``transaction()`` block takes the write lock up front (``BEGIN IMMEDIATE``), so read-then-write
sequences are atomic across threads and across processes that share the file.

Durability: ``synchronous=NORMAL`` in WAL mode keeps every committed transaction across a crash or kill
of the process (what idempotency needs); only a power loss may drop the last commits. Pass
``synchronous="FULL"`` to survive power loss as well, at the cost of an fsync per commit.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from tooldispatch.errors import ConfigError
from tooldispatch.store.migrations import MIGRATIONS

Params = Sequence[Any]


class Store:
    """A SQLite database with the tooldispatch schema applied.

    Args:
        path: a file path, or ``":memory:"`` for a private in-memory database.
        synchronous: SQLite's ``synchronous`` pragma (see the module docstring).
        busy_timeout_s: how long to wait for another process holding the write lock.

    Raises:
        ConfigError: the file cannot be opened or is not a SQLite database.
    """

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout_s: float = 10.0,
    ) -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        self.closed = False
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_s
            )
            self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
            if self.path != ":memory:":
                self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute(f"PRAGMA synchronous = {synchronous}")
            self._migrate()
        except (sqlite3.DatabaseError, OSError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise ConfigError(
                f"cannot open the state store {self.path!r}: {why}; point store= at a writable SQLite file"
            ) from exc

    def _migrate(self) -> None:
        with self.transaction() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
            applied = {row[0] for row in conn.execute("SELECT name FROM schema_migrations")}
            for migration in list(MIGRATIONS):
                if migration.name in applied:
                    continue
                for statement in _split_sql(migration.sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations (name, applied_at) VALUES (?, datetime('now'))", (migration.name,)
                )
                applied.add(migration.name)
            conn.execute(f"PRAGMA user_version = {len(applied)}")

    @property
    def user_version(self) -> int:
        """The number of migrations applied to this file."""
        row = self.fetchone("PRAGMA user_version")
        return int(row[0]) if row else 0

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Run a block atomically, holding the write lock from the start; commits on success.

        Nested blocks join the outer transaction.
        """
        with self._lock:
            if self._conn.in_transaction:
                yield self._conn
                return
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def execute(self, sql: str, params: Params = ()) -> int:
        """Run one statement (committed at once outside a transaction) and return the changed row count."""
        with self._lock:
            return self._conn.execute(sql, params).rowcount

    def fetchone(self, sql: str, params: Params = ()) -> tuple[Any, ...] | None:
        """Run a query and return its first row, or None."""
        with self._lock:
            row = self._conn.execute(sql, params).fetchone()
            return tuple(row) if row is not None else None

    def executemany(self, sql: str, rows: Sequence[Params]) -> int:
        """Run one statement for each row (atomically when inside ``transaction()``)."""
        with self._lock:
            return self._conn.executemany(sql, rows).rowcount

    def fetchall(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """Run a query and return every row."""
        with self._lock:
            return [tuple(r) for r in self._conn.execute(sql, params).fetchall()]

    def close(self) -> None:
        """Close the connection; the store cannot be used afterwards."""
        with self._lock:
            self.closed = True
            self._conn.close()


def _split_sql(script: str) -> list[str]:
    """Split a migration script into statements (``executescript`` would commit the open transaction)."""
    statements: list[str] = []
    current: list[str] = []
    for line in script.splitlines():
        code = line.split("--", 1)[0]
        current.append(code)
        if code.rstrip().endswith(";") and sqlite3.complete_statement("\n".join(current)):
            statement = "\n".join(current).strip()
            if statement.strip(";").strip():
                statements.append(statement)
            current = []
    rest = "\n".join(current).strip()
    if rest:
        statements.append(rest)
    return statements
