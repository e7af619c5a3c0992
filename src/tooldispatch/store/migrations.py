"""The ordered list of schema migrations, and how other modules add theirs.

Each migration has a unique name and a SQL script. ``Store`` applies, in list order, every migration
whose name is not yet recorded in the ``schema_migrations`` table, one transaction each, and sets
``PRAGMA user_version`` to the number applied. Recording names (not only a counter) keeps an old file
correct when a module appends its migrations later.

To add tables from another module, call ``register_migration`` at import time of that module and
import it before opening the store::

    from tooldispatch.store import register_migration

    register_migration("bench_0001_cells", "CREATE TABLE IF NOT EXISTS bench_cells (...);")

Never edit or reorder a migration that has shipped; append a new one instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from tooldispatch.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Migration:
    """One schema change.

    Attributes:
        name: unique, stable name (recorded in the file once applied).
        sql: one or more SQL statements, run with ``executescript`` inside a transaction.
    """

    name: str
    sql: str


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

MIGRATIONS: list[Migration] = [Migration("core_0001", _CORE), Migration("core_0002_trace_content", _TRACE_CONTENT)]
"""Every known migration, in the order it is applied."""


def register_migration(name: str, sql: str) -> None:
    """Append a migration; registering the same name and SQL twice is a no-op.

    Args:
        name: unique, stable name, e.g. ``"bench_0001_cells"``.
        sql: the SQL script; use ``IF NOT EXISTS`` so it is safe on files made before it existed.

    Raises:
        ConfigError: the name is already registered with different SQL.
    """
    for existing in MIGRATIONS:
        if existing.name == name:
            if existing.sql != sql:
                raise ConfigError(f"migration {name!r} is already registered with different SQL; give yours a new name")
            return
    MIGRATIONS.append(Migration(name, sql))


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

MIGRATIONS.append(Migration("proxy_0001_requests", _PROXY_REQUESTS))
