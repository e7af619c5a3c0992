"""The ordered list of schema migrations, and how other modules add theirs.

Each migration has a unique name and a SQL script. A store applies, in list order, every migration whose
name is not yet recorded in its ``schema_migrations`` table, one transaction each (SQLite also sets
``PRAGMA user_version`` to the number applied). Recording names (not only a counter) keeps an old store
correct when a module appends its migrations later.

One list serves both stores. Scripts are written in portable SQL: the types TEXT, INTEGER, REAL and BLOB,
no AUTOINCREMENT, no SQLite-only syntax. On PostgreSQL the types are widened to match SQLite's
(``postgres_ddl``: INTEGER → BIGINT, REAL → DOUBLE PRECISION, BLOB → BYTEA; the one shipped
``INTEGER PRIMARY KEY AUTOINCREMENT`` → an identity column). Where a dialect needs other SQL, a migration
carries it (``Migration.postgresql``).

To add tables from another module, call ``register_migration`` at import time of that module and
import it before opening the store::

    from tooldispatch.store import register_migration

    register_migration("bench_0001_cells", "CREATE TABLE IF NOT EXISTS bench_cells (...);")

Never edit or reorder a migration that has shipped; append a new one instead.

A store holding a migration this build does not know, under a prefix it does know (``core_0009`` when this
build ends at ``core_0003``), was written by a newer build: opening it is refused (``plan``).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tooldispatch.errors import ConfigError
from tooldispatch.store.base import Dialect, SchemaReport


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema change.

    Attributes:
        name: unique, stable name (recorded in the file once applied).
        sql: one or more portable SQL statements, run one by one inside a transaction.
        postgresql: the script to run on PostgreSQL instead of ``postgres_ddl(sql)``, where the dialects differ.
    """

    name: str
    sql: str
    postgresql: str | None = None

    def script(self, dialect: str) -> str:
        """The SQL to run on ``dialect`` (``sqlite`` or ``postgresql``)."""
        if dialect == "sqlite":
            return self.sql
        return self.postgresql if self.postgresql is not None else postgres_ddl(self.sql)


_CORE = """
CREATE TABLE IF NOT EXISTS idempotency (
    key TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    state TEXT NOT NULL,            -- in_flight | completed | unknown
    status TEXT,                    -- the stored result's status (ok | error)
    reason TEXT,
    content TEXT,                   -- the model-visible content to replay
    trace_id TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS idempotency_expires ON idempotency(expires_at);

CREATE TABLE IF NOT EXISTS traces (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    started_at REAL NOT NULL,
    ended_at REAL NOT NULL,
    data TEXT NOT NULL              -- DispatchTrace.to_dict() as JSON
);
CREATE INDEX IF NOT EXISTS traces_session ON traces(session_id, started_at);
CREATE INDEX IF NOT EXISTS traces_tool ON traces(tool);

CREATE TABLE IF NOT EXISTS trace_results (
    trace_id TEXT PRIMARY KEY,
    content TEXT NOT NULL           -- the full result of a call whose content was bounded
);

CREATE TABLE IF NOT EXISTS approvals (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    args TEXT NOT NULL,
    trigger TEXT,
    state TEXT NOT NULL,            -- pending | approved | denied
    reason TEXT,
    trace_id TEXT NOT NULL,
    created_at REAL NOT NULL,
    decided_at REAL
);
CREATE INDEX IF NOT EXISTS approvals_state ON approvals(state, created_at);

CREATE TABLE IF NOT EXISTS quota_usage (
    tool TEXT NOT NULL,
    scope TEXT NOT NULL,            -- "session:<id>" or "<field>=<json value>"
    count INTEGER NOT NULL,
    PRIMARY KEY (tool, scope)
);

CREATE TABLE IF NOT EXISTS freshness (
    session_id TEXT NOT NULL,
    resource TEXT NOT NULL,
    refreshed_at REAL NOT NULL,
    PRIMARY KEY (session_id, resource)
);

CREATE TABLE IF NOT EXISTS saga (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    trace_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    inverse_tool TEXT NOT NULL,
    inverse_args TEXT NOT NULL,
    idempotency_key TEXT,
    state TEXT NOT NULL,            -- pending | compensated | failed
    compensation_trace_id TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS saga_session ON saga(session_id, state, id);

CREATE TABLE IF NOT EXISTS tool_descriptions (
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    sha256 TEXT NOT NULL,
    source TEXT NOT NULL,
    first_seen REAL NOT NULL,
    PRIMARY KEY (name, version)
);

CREATE TABLE IF NOT EXISTS bench_runs (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    created_at REAL NOT NULL,
    meta TEXT NOT NULL
);

CREATE TABLE IF NOT EXISTS bench_results (
    run_id TEXT NOT NULL REFERENCES bench_runs(id),
    name TEXT NOT NULL,
    value REAL,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, name)
);
"""

_TRACE_CONTENT = """
ALTER TABLE traces ADD COLUMN content TEXT;     -- the model-visible content (bounded when it was too long)
"""

# SQLite lists traces in insertion order by rowid; PostgreSQL has no rowid, so it gets a sequence column.
_TRACE_ORDER_SQLITE = """
-- nothing to do: SQLite orders traces by rowid
"""
_TRACE_ORDER_POSTGRESQL = """
ALTER TABLE traces ADD COLUMN IF NOT EXISTS seq BIGINT GENERATED BY DEFAULT AS IDENTITY;
CREATE INDEX IF NOT EXISTS traces_order ON traces(started_at, seq);
"""

# What a side effect acted on (dispatch.saga.resource_of): a later call on the same thing ends the stored
# result and the pending compensation of earlier ones (a saga entry so ended is `compensated` or the new
# state `superseded`). NULL for records written before, and for tools that name nothing they act on.
_RESOURCE = """
ALTER TABLE idempotency ADD COLUMN resource TEXT;
ALTER TABLE saga ADD COLUMN resource TEXT;
CREATE INDEX IF NOT EXISTS idempotency_resource ON idempotency(resource);
CREATE INDEX IF NOT EXISTS saga_resource ON saga(resource, state);
"""

MIGRATIONS: list[Migration] = [
    Migration("core_0001", _CORE),
    Migration("core_0002_trace_content", _TRACE_CONTENT),
    Migration("core_0003_trace_order", _TRACE_ORDER_SQLITE, postgresql=_TRACE_ORDER_POSTGRESQL),
    Migration("core_0004_resource", _RESOURCE),
]
"""Every known migration, in the order it is applied."""

_PG_TYPES = (
    (re.compile(r"\bINTEGER\s+PRIMARY\s+KEY\s+AUTOINCREMENT\b"), "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
    (re.compile(r"\bINTEGER\b"), "BIGINT"),
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
    (re.compile(r"\bBLOB\b"), "BYTEA"),
)


def postgres_ddl(sql: str) -> str:
    """A portable script with its column types widened to PostgreSQL's equivalents of SQLite's.

    SQLite's INTEGER holds 64 bits and its REAL is a double; PostgreSQL's INTEGER and REAL are half that,
    which would truncate counters and timestamps.
    """
    for pattern, replacement in _PG_TYPES:
        sql = pattern.sub(replacement, sql)
    return sql


@dataclass(frozen=True, slots=True)
class Plan:
    """How a store's applied migrations compare with this build's.

    Attributes:
        pending: this build's migrations the store lacks, in the order they apply.
        newer: migrations the store has that this build does not know, under a prefix it knows.
    """

    pending: list[Migration]
    newer: list[str]


def plan(applied: Iterable[str]) -> Plan:
    """Compare the names a store recorded with ``MIGRATIONS`` (pure).

    A name under a prefix no registered migration uses (``mcp_0001`` when the module that adds it was not
    imported) is neither pending nor newer: that module checks its own tables.
    """
    done = set(applied)
    known = {m.name for m in MIGRATIONS}
    prefixes = {m.name.split("_", 1)[0] for m in MIGRATIONS}
    return Plan(
        pending=[m for m in MIGRATIONS if m.name not in done],
        newer=sorted(n for n in done if n not in known and n.split("_", 1)[0] in prefixes),
    )


def schema_report(target: str, dialect: Dialect, applied: list[str], server: str) -> SchemaReport:
    """What ``check()`` reports for a store that recorded ``applied`` (pure)."""
    found = plan(applied)
    return SchemaReport(
        target=target,
        dialect=dialect,
        applied=applied,
        pending=[m.name for m in found.pending],
        newer=found.newer,
        server=server,
    )


def refuse_newer(target: str, newer: list[str]) -> None:
    """Refuse a store written by a newer build.

    Raises:
        ConfigError: ``newer`` is not empty.
    """
    if newer:
        raise ConfigError(
            f"the state store {target} has a schema newer than this tooldispatch ({', '.join(newer)}); "
            "upgrade tooldispatch here, or point --store at a store of this version"
        )


def apply_pending(
    execute: Callable[..., Any], applied: set[str], target: str, dialect: str, placeholder: str
) -> set[str]:
    """Apply, inside the caller's open transaction, every migration not in ``applied``; the names now applied.

    Args:
        execute: the connection's ``execute(sql, params)``.
        applied: the names the store recorded (updated in place).
        target: the store, for the error message.
        dialect: ``sqlite`` or ``postgresql`` (which script a migration gives).
        placeholder: the driver's parameter marker (``?`` or ``%s``).

    Raises:
        ConfigError: the store was written by a newer build.
    """
    refuse_newer(target, plan(applied).newer)
    record = f"INSERT INTO schema_migrations (name, applied_at) VALUES ({placeholder}, {placeholder})"
    for migration in list(MIGRATIONS):
        if migration.name in applied:
            continue
        for statement in split_sql(migration.script(dialect)):
            execute(statement)
        execute(record, (migration.name, datetime.now(UTC).isoformat(timespec="seconds")))
        applied.add(migration.name)
    return applied


def split_sql(script: str) -> list[str]:
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


def register_migration(name: str, sql: str, *, postgresql: str | None = None) -> None:
    """Append a migration; registering the same name and SQL twice is a no-op.

    Args:
        name: unique, stable name, e.g. ``"bench_0001_cells"``.
        sql: the portable SQL script; use ``IF NOT EXISTS`` so it is safe on stores made before it existed.
        postgresql: the script for PostgreSQL, where it must differ from ``postgres_ddl(sql)``.

    Raises:
        ConfigError: the name is already registered with different SQL.
    """
    for existing in MIGRATIONS:
        if existing.name == name:
            if existing.sql != sql or existing.postgresql != postgresql:
                raise ConfigError(f"migration {name!r} is already registered with different SQL; give yours a new name")
            return
    MIGRATIONS.append(Migration(name, sql, postgresql))


_MCP_PINS = """
CREATE TABLE IF NOT EXISTS mcp_pins (
    id TEXT PRIMARY KEY,            -- pin_<16 hex digits>, what `tooldispatch approvals approve` takes
    server TEXT NOT NULL,
    tool TEXT NOT NULL,
    sha256 TEXT NOT NULL,           -- of the tool's definition (description, schemas, annotations)
    definition TEXT NOT NULL,       -- the definition as listed, JSON
    state TEXT NOT NULL,            -- approved | pending | denied
    first_seen REAL NOT NULL,
    decided_at REAL
);
CREATE INDEX IF NOT EXISTS mcp_pins_tool ON mcp_pins(server, tool);
"""

register_migration("mcp_0001_pins", _MCP_PINS)


_PROXY_REQUESTS = """
CREATE TABLE IF NOT EXISTS proxy_requests (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    model TEXT NOT NULL,
    quant TEXT NOT NULL,
    engine TEXT NOT NULL,
    mode TEXT NOT NULL,             -- server | client | in-process | forward (no tools: passed through)
    stream INTEGER NOT NULL,
    tools INTEGER NOT NULL,         -- tools declared
    tool_choice TEXT NOT NULL,
    status INTEGER NOT NULL,        -- the HTTP status answered
    error TEXT,                     -- the error code when status is not 200
    calls INTEGER NOT NULL,         -- tool calls answered
    stage TEXT NOT NULL,            -- the deepest parse stage an answered call needed (none: no call)
    formats TEXT NOT NULL,          -- the call formats seen, comma-separated
    ok_strict INTEGER NOT NULL,
    ok_fallback INTEGER NOT NULL,
    repaired INTEGER NOT NULL,
    invalid_json INTEGER NOT NULL,
    unknown_name INTEGER NOT NULL,
    schema_mismatch INTEGER NOT NULL,
    truncated INTEGER NOT NULL,
    repairs TEXT NOT NULL,          -- JSON {kind: count} of every repair made
    flags TEXT NOT NULL,            -- no_call, in_reasoning, comma-separated
    finish_reason TEXT,
    latency_s REAL NOT NULL,        -- from the request's arrival to the answer's last byte
    first_token_s REAL,             -- to the first byte of a streamed answer
    prompt_tokens INTEGER,
    completion_tokens INTEGER
);
CREATE INDEX IF NOT EXISTS proxy_requests_model ON proxy_requests(model, quant, created_at);

CREATE TABLE IF NOT EXISTS proxy_records (
    request_id TEXT PRIMARY KEY,
    request TEXT NOT NULL,          -- the request body as sent
    output TEXT NOT NULL,           -- the upstream's raw output: text, reasoning, native calls, finish reason
    answer TEXT NOT NULL            -- the answer sent (a stream's chunks put together)
);
"""

register_migration("proxy_0001_requests", _PROXY_REQUESTS)
# A call candidate read from the middle of prose, kept with its reason but never run (the parser's Ambiguous).
register_migration(
    "proxy_0002_ambiguous", "ALTER TABLE proxy_requests ADD COLUMN ambiguous INTEGER NOT NULL DEFAULT 0;"
)

# Every agent run of the command line (`tooldispatch run`, `chat`): what `tooldispatch logs` lists, what
# `chat -c` continues, and where `approvals approve` finds the run's tools and world (tooldispatch/runlog.py).
_CLI_RUNS = """
CREATE TABLE IF NOT EXISTS cli_runs (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    parent_id TEXT,                 -- the run this one continues (chat), or NULL
    started_at REAL NOT NULL,
    command TEXT NOT NULL,          -- run | chat
    task TEXT NOT NULL,
    model TEXT NOT NULL,
    profile TEXT NOT NULL,
    end_reason TEXT NOT NULL,       -- final_answer, max_turns, context_window, backend_error, ...
    exit_code INTEGER NOT NULL,
    calls INTEGER NOT NULL,         -- calls dispatched
    repairs INTEGER NOT NULL,
    rejected INTEGER NOT NULL,      -- call candidates the parser rejected
    pending INTEGER NOT NULL,       -- calls left awaiting approval
    wall_s REAL NOT NULL,
    sources TEXT NOT NULL,          -- JSON {"tools": [...], "mcp": [...]}: how to load the run's tools again
    world TEXT NOT NULL,            -- the demo world's file ('' when the run had none)
    settings TEXT NOT NULL,         -- JSON: n_ctx, temperature, seed, max_tokens, constrained, ...
    final_answer TEXT,
    messages TEXT NOT NULL,         -- JSON: the conversation, to continue it
    transcript TEXT NOT NULL        -- JSON: the run's full record (turns, parse outcomes, traces)
);
CREATE INDEX IF NOT EXISTS cli_runs_started ON cli_runs(started_at);
CREATE INDEX IF NOT EXISTS cli_runs_session ON cli_runs(session_id, started_at);
"""

register_migration("cli_0001_runs", _CLI_RUNS)
