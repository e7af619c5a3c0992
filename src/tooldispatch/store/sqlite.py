"""The SQLite store: one file, WAL mode, migrations, safe to share between threads.

One connection is shared by every thread behind a re-entrant lock: SQLite serializes writers anyway,
and one connection keeps ``":memory:"`` databases whole. Statements run in autocommit mode; a
``transaction()`` block takes the write lock up front (``BEGIN IMMEDIATE``), so read-then-write
sequences are atomic across threads and across processes that share the file.

Durability: ``synchronous=NORMAL`` in WAL mode keeps every committed transaction across a crash or kill
of the process (what idempotency needs); only a power loss may drop the last commits. Pass
``synchronous="FULL"`` to survive power loss as well, at the cost of an fsync per commit.

``readonly=True`` opens an existing file for reading only: nothing is created, migrated or switched to
WAL, and a file that is not a tooldispatch store is refused (what the read-only CLI commands use).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from tooldispatch.errors import ConfigError
from tooldispatch.store.base import Dialect, Params, SchemaReport
from tooldispatch.store.migrations import apply_pending, plan, refuse_newer, schema_report


class SQLiteStore:
    """A SQLite database with the tooldispatch schema applied.

    Args:
        path: a file path, or ``":memory:"`` for a private in-memory database.
        synchronous: SQLite's ``synchronous`` pragma (see the module docstring).
        busy_timeout_s: how long to wait for another process holding the write lock.
        readonly: open an existing store for reading only (see the module docstring).
        validate: with ``readonly``, refuse a file that is not an up-to-date tooldispatch store (``False`` only
            to inspect one with ``check()``).

    Raises:
        ConfigError: the file cannot be opened, is not a SQLite database, holds a schema newer than this
            build, or (``readonly``) is not a tooldispatch store.
    """

    dialect: Dialect = "sqlite"

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
        busy_timeout_s: float = 10.0,
        readonly: bool = False,
        validate: bool = True,
    ) -> None:
        self.path = str(path)
        self.target = self.path
        self.readonly = readonly
        self._lock = threading.RLock()
        self.closed = False
        try:
            if readonly:
                self._conn = _open_readonly(self.path, busy_timeout_s)
                if validate:
                    self._check_readable()
                return
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
        except ConfigError:
            if hasattr(self, "_conn"):
                self._conn.close()
            raise
        except (sqlite3.DatabaseError, OSError) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            if readonly:
                raise ConfigError(
                    f"cannot read the state store {self.path!r}: {why}; pass --store with the file given to "
                    "Dispatcher(store=...)"
                ) from exc
            raise ConfigError(
                f"cannot open the state store {self.path!r}: {why}; point store= at a writable SQLite file"
            ) from exc

    def _applied(self, conn: sqlite3.Connection) -> list[str] | None:
        """Recorded migration names in the order applied, or None when the file has no record of them."""
        found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'")
        if found.fetchone() is None:
            return None
        return [row[0] for row in conn.execute("SELECT name FROM schema_migrations ORDER BY rowid")]

    def _check_readable(self) -> None:
        applied = self._applied(self._conn)
        if applied is None or "core_0001" not in applied:
            raise ConfigError(
                f"{self.path} is not a tooldispatch state store (it has no tooldispatch schema); pass --store "
                "with the file given to Dispatcher(store=...)"
            )
        found = plan(applied)
        refuse_newer(self.target, found.newer)
        core = [m.name for m in found.pending if m.name.startswith("core_")]
        if core:
            raise ConfigError(
                f"the state store {self.path} was made by an older tooldispatch and lacks {', '.join(core)}; "
                f"run 'tooldispatch store migrate --store {self.path}' first"
            )

    def _migrate(self) -> None:
        with self.transaction() as conn:
            self._refuse_foreign(conn)
            conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
            applied = apply_pending(conn.execute, set(self._applied(conn) or ()), self.target, self.dialect, "?")
            conn.execute(f"PRAGMA user_version = {len(applied)}")

    def _refuse_foreign(self, conn: sqlite3.Connection) -> None:
        """Refuse to add the schema to another program's database (tables, but no record of migrations)."""
        if self._applied(conn) is not None:
            return
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        if tables:
            shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
            raise ConfigError(
                f"{self.path} is not a tooldispatch state store (it holds other tables: {shown}); point --store at "
                "a new file or an existing state store"
            )

    def check(self) -> SchemaReport:
        """Compare the file's migrations with this build's, changing nothing."""
        with self._lock:
            self._refuse_foreign(self._conn)
            applied = self._applied(self._conn) or []
        return schema_report(self.target, self.dialect, applied, f"SQLite {sqlite3.sqlite_version}")

    @property
    def user_version(self) -> int:
        """The number of migrations applied to this file."""
        row = self.fetchone("PRAGMA user_version")
        return int(row[0]) if row else 0

    @contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """Run a block atomically, holding the write lock from the start; commits on success.

        Nested blocks join the outer transaction. ``durable`` is the PostgreSQL store's: here every commit has
        the file's ``synchronous`` setting.
        """
        with self._lock:
            if self._conn.in_transaction:
                yield self._conn
                return
            self._conn.execute("BEGIN" if self.readonly else "BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def execute(self, sql: str, params: Params = (), *, durable: bool = True) -> int:
        """Run one statement (committed at once outside a transaction) and return the changed row count."""
        with self._lock:
            return self._conn.execute(sql, params).rowcount

    def fetchone(self, sql: str, params: Params = ()) -> tuple[Any, ...] | None:
        """Run a query and return its first row, or None."""
        with self._lock:
            row = self._conn.execute(sql, params).fetchone()
            return tuple(row) if row is not None else None

    def executemany(self, sql: str, rows: Sequence[Params], *, durable: bool = True) -> int:
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


Store = SQLiteStore
"""The name the SQLite store has always had; ``open_store`` picks a store from a path or URL."""


def _open_readonly(path: str, busy_timeout_s: float) -> sqlite3.Connection:
    """A read-only connection to an existing file (``mode=ro``: no file is created, nothing is written)."""
    if path == ":memory:" or not Path(path).is_file():
        raise ConfigError(f"no state store at {path}; pass --store with the file given to Dispatcher(store=...)")
    uri = f"file:{quote(str(Path(path).resolve()))}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False, timeout=busy_timeout_s)
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
    conn.execute("PRAGMA query_only = ON")
    return conn
