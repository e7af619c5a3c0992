"""The store seam: what the dispatcher, the CLI and the benchmarks need from a SQL database.

Two implementations: ``SQLiteStore`` (one file, the embedded default) and ``PostgresStore`` (a server
shared by many workers). Callers write portable SQL with ``?`` placeholders; each store adapts it to its
driver. What both guarantee, and what callers rely on for concurrency:

- ``execute`` and the fetches outside a transaction commit at once (autocommit);
- ``durable=False`` marks a write whose loss in a crash of the database server is safe (a stored result, a
  trace, a freshness stamp): PostgreSQL then does not wait for its disk; SQLite ignores it;
- ``transaction()`` runs a block atomically; nested blocks on the same thread join the outer one;
- one statement is atomic against every other worker, so take-once and counters are single statements:
  ``UPDATE … WHERE state = 'pending'`` (approvals, saga entries), ``INSERT … ON CONFLICT … DO UPDATE …
  WHERE … RETURNING`` (idempotency claims, quota counters). Read-then-write inside a transaction is
  serialized on SQLite (``BEGIN IMMEDIATE``) but not on PostgreSQL (READ COMMITTED), so it is not used
  where a lost update would matter.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Params = Sequence[Any]
Dialect = Literal["sqlite", "postgresql"]


class Cursor(Protocol):
    """The result of one statement."""

    @property
    def rowcount(self) -> int:
        """Rows the statement changed."""
        ...

    def fetchone(self) -> Any:
        """The next row, or None."""
        ...

    def fetchall(self) -> list[Any]:
        """The remaining rows."""
        ...


class Connection(Protocol):
    """The connection a ``transaction()`` block runs its statements on."""

    def execute(self, sql: str, params: Params = (), /) -> Cursor:
        """Run one statement."""
        ...


@dataclass(frozen=True, slots=True)
class SchemaReport:
    """What ``check()`` found.

    Attributes:
        target: the store, as it may be shown (a file path, or a URL without its password).
        dialect: ``sqlite`` or ``postgresql``.
        applied: migration names the store recorded, in the order applied.
        pending: this build's migrations the store lacks.
        newer: migrations the store has that this build does not know (written by a newer build).
        server: the database server's version.
    """

    target: str
    dialect: Dialect
    applied: list[str]
    pending: list[str]
    newer: list[str]
    server: str

    @property
    def ok(self) -> bool:
        """Up to date with this build."""
        return not self.pending and not self.newer


class StateStore(Protocol):
    """A SQL database with the tooldispatch schema: the one seam every state reader and writer uses.

    Attributes:
        dialect: ``sqlite`` or ``postgresql``, for the few statements that differ (see each caller).
        target: the store as it may be shown in messages and logs (never with a password).
        closed: whether ``close()`` ran.
    """

    dialect: Dialect
    target: str
    closed: bool

    def transaction(self, *, durable: bool = True) -> AbstractContextManager[Connection]:
        """Run a block atomically; commits on success, rolls back on an exception."""
        ...

    def execute(self, sql: str, params: Params = (), *, durable: bool = True) -> int:
        """Run one statement and return the changed row count."""
        ...

    def executemany(self, sql: str, rows: Sequence[Params], *, durable: bool = True) -> int:
        """Run one statement for each row (atomically when inside ``transaction()``)."""
        ...

    def fetchone(self, sql: str, params: Params = ()) -> tuple[Any, ...] | None:
        """Run a query and return its first row, or None."""
        ...

    def fetchall(self, sql: str, params: Params = ()) -> list[tuple[Any, ...]]:
        """Run a query and return every row."""
        ...

    def check(self) -> SchemaReport:
        """Compare the store's migrations with this build's, changing nothing."""
        ...

    def close(self) -> None:
        """Release the connection(s); the store cannot be used afterwards."""
        ...
