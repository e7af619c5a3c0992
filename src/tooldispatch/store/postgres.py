"""The PostgreSQL store: one server shared by many workers and proxies, through a connection pool.

Statements use the portable SQL of the callers, with ``?`` placeholders turned into psycopg's ``%s``.
Outside a transaction every statement commits at once (the pool's connections are in autocommit mode);
``transaction()`` holds one pooled connection for the block (``BEGIN`` … ``COMMIT``, READ COMMITTED), and
the store's own methods called inside the block on the same thread run on that connection, as they do on
SQLite. Atomicity across workers comes from single statements (see ``store.base``), not from locks held
across round trips.

Migrations run under a transaction-scoped advisory lock, so workers starting together migrate once.

Durability: every commit reaches the server before the call returns, so it survives the worker being
killed. A write that guards a side effect (an in-flight claim, a quota count, an approval decision) also
waits for the server's disk (``synchronous_commit`` as the server sets it, ``on`` by default), so it
survives the server's crash too. A write whose loss is safe (``durable=False``: a stored result, whose loss
leaves the call "outcome unknown"; a trace; a freshness stamp, whose loss makes state look stale) goes
through a second pool whose sessions set ``synchronous_commit = off``: it is visible at once and flushed
within a fraction of a second, without a disk wait per call. A URL with
``?options=-c%20synchronous_commit%3Doff`` relaxes every write, like SQLite's ``synchronous=NORMAL``
(survives any worker crash, may lose the last commits if the database server or its host crashes).

Credentials never leave this module: the store is shown as ``redact(url)``, and any driver message is
scrubbed of the password before it becomes an error.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from tooldispatch.errors import ConfigError, StoreUnavailable
from tooldispatch.store.base import Dialect, Params, SchemaReport
from tooldispatch.store.migrations import MIGRATIONS, apply_pending, plan, refuse_newer, schema_report
from tooldispatch.store.redact import redact

_MIGRATION_LOCK = 0x7464_6D67  # "tdmg": the advisory lock key taken while migrating
_SCHEME = re.compile(r"^postgres(?:ql)?(?:\+[A-Za-z0-9]+)?://", re.IGNORECASE)  # postgres://, postgresql+psycopg://


class PostgresStore:
    """A PostgreSQL database with the tooldispatch schema applied.

    Args:
        url: a ``postgresql://user:password@host:port/dbname`` URL (libpq's; ``?sslmode=…`` and the like pass
            through). The password may also come from ``PGPASSWORD`` or ``~/.pgpass``.
        pool_size: the most connections this process holds.
        connect_timeout_s: how long to wait for the server when connecting.
        readonly: open an existing store for reading only (nothing created or migrated).
        validate: with ``readonly``, refuse a database that is not an up-to-date tooldispatch store (``False``
            only to inspect one with ``check()``).

    Raises:
        ConfigError: the server is unreachable, refuses the credentials, lacks the database, holds a schema
            newer than this build, or (``readonly``) the database is not a tooldispatch store.
    """

    dialect: Dialect = "postgresql"

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        connect_timeout_s: float = 5.0,
        readonly: bool = False,
        validate: bool = True,
    ) -> None:
        self.target = redact(url)
        self.readonly = readonly
        self.closed = False
        self._local = threading.local()
        try:
            params: dict[str, Any] = conninfo_to_dict(_SCHEME.sub("postgresql://", url, count=1))
        except psycopg.ProgrammingError:
            raise ConfigError(f"the store URL {self.target} cannot be read; check its form") from None
        self._password = str(params.get("password") or "")
        params.setdefault("connect_timeout", max(1, round(connect_timeout_s)))
        params["autocommit"] = True
        if readonly:
            params["options"] = (str(params.get("options") or "") + " -c default_transaction_read_only=on").strip()
        try:
            with psycopg.connect(**params) as conn:
                self.server = f"PostgreSQL {conn.info.server_version // 10000}.{conn.info.server_version % 10000}"
                if not readonly:
                    self._migrate(conn)
                elif validate:
                    self._check_readable(conn)
        except psycopg.Error as exc:
            raise self._explain(exc) from None
        relaxed = {**params, "options": (str(params.get("options") or "") + " -c synchronous_commit=off").strip()}
        timeout = max(10.0, connect_timeout_s)
        # The pools connect in the background: the connection above already proved the URL works.
        self._pools: dict[bool, ConnectionPool[Any]] = {}
        for durable, settings in ((True, params), (False, relaxed)):
            pool: ConnectionPool[Any] = ConnectionPool(
                kwargs=settings, min_size=1, max_size=max(1, pool_size), timeout=timeout, open=False
            )
            pool.open(wait=False)
            self._pools[durable] = pool

    def __repr__(self) -> str:
        return f"PostgresStore({self.target!r})"

    # ------------------------------------------------------------------ schema

    def _applied(self, conn: psycopg.Connection[Any]) -> list[str] | None:
        row = conn.execute("SELECT to_regclass('schema_migrations')").fetchone()
        if row is None or row[0] is None:
            return None
        names = {r[0] for r in conn.execute("SELECT name FROM schema_migrations").fetchall()}
        order = {m.name: i for i, m in enumerate(MIGRATIONS)}
        return sorted(names, key=lambda n: (order.get(n, len(order)), n))

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
            apply_pending(conn.execute, set(self._applied(conn) or ()), self.target, self.dialect, "%s")

    def _check_readable(self, conn: psycopg.Connection[Any]) -> None:
        applied = self._applied(conn)
        if applied is None or "core_0001" not in applied:
            raise ConfigError(
                f"{self.target} is not a tooldispatch state store (it has no tooldispatch schema); run "
                f"'tooldispatch store migrate --store URL' to create one"
            )
        found = plan(applied)
        refuse_newer(self.target, found.newer)
        core = [m.name for m in found.pending if m.name.startswith("core_")]
        if core:
            raise ConfigError(
                f"the state store {self.target} was made by an older tooldispatch and lacks {', '.join(core)}; "
                "run 'tooldispatch store migrate --store URL' first"
            )

    def check(self) -> SchemaReport:
        """Compare the database's migrations with this build's, changing nothing."""
        with self._connection() as conn:
            applied = self._applied(conn) or []
        return schema_report(self.target, self.dialect, applied, self.server)

    @property
    def user_version(self) -> int:
        """The number of migrations applied to this database."""
        row = self.fetchone("SELECT COUNT(*) FROM schema_migrations")
        return int(row[0]) if row else 0

    # ------------------------------------------------------------------ statements

    @contextmanager
    def _connection(self, durable: bool = True) -> Iterator[psycopg.Connection[Any]]:
        """The connection of this thread's open transaction, else one from the pool for one statement."""
        current: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if current is not None:
            yield current
            return
        try:
            with self._pools[durable].connection() as conn:
                yield conn
        except PoolTimeout:
            raise StoreUnavailable(
                f"no connection to the PostgreSQL store {self.target} came free or could be made; check that the "
                "server is running, or give this process a larger pool"
            ) from None
        except psycopg.OperationalError as exc:
            # the pool drops the broken connection; the others are checked now, so the next statement gets a
            # working one (or the same error at once, while the server is down)
            for pool in self._pools.values():
                pool.check()
            reason = _last_reason(str(exc).replace(self._password, "***") if self._password else str(exc))
            raise StoreUnavailable(
                f"the PostgreSQL store {self.target} failed: {reason}; check that the server is running, then retry"
            ) from None

    @contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[_Conn]:
        """Run a block atomically on one pooled connection; commits on success.

        Nested blocks on the same thread join the outer transaction (and its durability).
        """
        current: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if current is not None:
            yield _Conn(current)
            return
        with self._connection(durable) as conn, conn.transaction():
            self._local.conn = conn
            try:
                yield _Conn(conn)
            finally:
                self._local.conn = None

    def execute(self, sql: str, params: Params = (), *, durable: bool = True) -> int:
        """Run one statement (committed at once outside a transaction) and return the changed row count."""
        with self._connection(durable) as conn:
            return conn.execute(*_adapt(sql, params)).rowcount

    def executemany(self, sql: str, rows: Sequence[Params], *, durable: bool = True) -> int:
        """Run one statement for each row (atomically when inside ``transaction()``)."""
        if not rows:
            return 0
        with self._connection(durable) as conn, conn.cursor() as cur:
            cur.executemany(_placeholders(sql), rows)
            return cur.rowcount

    def fetchone(self, sql: str, params: Params = ()) -> tuple[Any, ...] | None:
        """Run a query and return its first row, or None."""
        with self._connection() as conn:
            row = conn.execute(*_adapt(sql, params)).fetchone()
            return tuple(row) if row is not None else None

    def fetchall(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """Run a query and return every row."""
        with self._connection() as conn:
            return [tuple(r) for r in conn.execute(*_adapt(sql, params)).fetchall()]

    def close(self) -> None:
        """Close the pools; the store cannot be used afterwards."""
        if not self.closed:
            self.closed = True
            for pool in self._pools.values():
                pool.close()

    # ------------------------------------------------------------------ errors

    def _explain(self, exc: psycopg.Error) -> ConfigError:
        """A one-line ConfigError for a failed connection, naming the fix, with no credentials in it."""
        text = str(exc)
        if self._password:
            text = text.replace(self._password, "***")
        lower = text.lower()
        state = getattr(exc, "sqlstate", None)
        where = f"the PostgreSQL store {self.target}"
        if state == "28P01" or "password authentication failed" in lower or "no password supplied" in lower:
            return ConfigError(
                f"{where} refused the user name or password; fix the credentials in the URL (or PGPASSWORD, ~/.pgpass)"
            )
        if state == "28000" or "no pg_hba.conf entry" in lower or ("role" in lower and "does not exist" in lower):
            return ConfigError(
                f"{where} does not let this user in; create the role or allow it in pg_hba.conf on the server"
            )
        if state == "3D000" or ("database" in lower and "does not exist" in lower):
            return ConfigError(f"{where} has no such database; create it first (createdb) or fix the URL's path")
        if any(
            s in lower
            for s in ("connection refused", "could not translate host", "timeout expired", "no route", "unreachable")
        ):
            return ConfigError(
                f"cannot reach {where}: {_last_reason(text)}; start the server, or fix the host and port in the URL"
            )
        return ConfigError(f"cannot use {where}: {_last_reason(text)}")


class _Conn:
    """The connection a ``transaction()`` block sees: portable SQL in, psycopg cursors out."""

    __slots__ = ("_conn",)

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Params = (), /) -> psycopg.Cursor[Any]:
        return self._conn.execute(*_adapt(sql, params))


def _adapt(sql: str, params: Params) -> tuple[str, Params | None]:
    """The statement and parameters for psycopg (no parameters: the text goes as it is, ``%`` included)."""
    if not params:
        return sql, None
    return _placeholders(sql), params


@functools.lru_cache(maxsize=1024)
def _placeholders(sql: str) -> str:
    """``?`` → ``%s`` and ``%`` → ``%%`` outside quoted literals and identifiers (a pure cache of statements)."""
    out: list[str] = []
    quote = ""
    for ch in sql:
        if quote:
            if ch == quote:
                quote = ""
            out.append("%%" if ch == "%" else ch)
        elif ch in ("'", '"'):
            quote = ch
            out.append(ch)
        elif ch == "?":
            out.append("%s")
        elif ch == "%":
            out.append("%%")
        else:
            out.append(ch)
    return "".join(out)


def _last_reason(text: str) -> str:
    """The driver's own reason, on one line (its messages nest "…failed: reason" and add hints below)."""
    first = text.strip().splitlines()[0] if text.strip() else "unknown error"
    return first.rsplit("failed: ", 1)[-1].strip() or first
