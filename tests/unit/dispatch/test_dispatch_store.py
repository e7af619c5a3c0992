"""The SQLite store: migrations by name, user_version, WAL files, appended migrations."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooldispatch.errors import ConfigError
from tooldispatch.store import MIGRATIONS, Store, register_migration


def test_fresh_store_has_every_table() -> None:
    """A new database gets the core tables and user_version equal to the migrations applied."""
    store = Store(":memory:")
    tables = {r[0] for r in store.fetchall("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {
        "idempotency",
        "traces",
        "trace_results",
        "approvals",
        "quota_usage",
        "freshness",
        "saga",
        "tool_descriptions",
        "bench_runs",
        "bench_results",
        "schema_migrations",
    } <= tables
    assert store.user_version == len(MIGRATIONS)


def test_file_store_uses_wal(tmp_path: Path) -> None:
    """A file store runs in WAL mode."""
    store = Store(tmp_path / "s.db")
    assert store.fetchone("PRAGMA journal_mode") == ("wal",)
    store.close()


def test_appended_migration_applies_to_an_existing_file(tmp_path: Path) -> None:
    """A migration registered later is applied once to a file made before it existed."""
    db = tmp_path / "s.db"
    Store(db).close()
    register_migration("test_0001_extra", "CREATE TABLE IF NOT EXISTS test_extra (x INTEGER);")
    try:
        store = Store(db)
        assert store.fetchone("SELECT name FROM schema_migrations WHERE name = 'test_0001_extra'") == (
            "test_0001_extra",
        )
        assert store.user_version == len(MIGRATIONS)
        store.execute("INSERT INTO test_extra VALUES (1)")
        store.close()
        assert Store(db).fetchall("SELECT x FROM test_extra") == [(1,)]
    finally:
        MIGRATIONS[:] = [m for m in MIGRATIONS if m.name != "test_0001_extra"]


def test_same_migration_name_with_other_sql_is_refused() -> None:
    """Re-registering a name with different SQL raises ConfigError; the same SQL is a no-op."""
    register_migration("core_0001", MIGRATIONS[0].sql)
    with pytest.raises(ConfigError, match="already registered with different SQL"):
        register_migration("core_0001", "SELECT 1;")


def test_transaction_rolls_back_on_error() -> None:
    """An exception inside transaction() leaves nothing written."""
    store = Store()
    with pytest.raises(RuntimeError), store.transaction() as conn:
        conn.execute("INSERT INTO freshness VALUES ('s', 'r', 1.0)")
        raise RuntimeError("stop")
    assert store.fetchall("SELECT * FROM freshness") == []


def test_not_a_database_is_a_config_error(tmp_path: Path) -> None:
    """A file that is not SQLite gives a ConfigError naming the path."""
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database at all" * 100)
    with pytest.raises(ConfigError, match="cannot open the state store"):
        Store(bad)


def test_a_store_whose_folder_cannot_be_made_is_a_config_error(tmp_path: Path) -> None:
    """A path under a regular file cannot become a folder: ConfigError naming the path and the reason."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    target = blocker / "state.db"
    with pytest.raises(ConfigError) as caught:
        Store(target)
    assert str(caught.value).startswith(f"cannot open the state store {str(target)!r}: ")
    assert str(caught.value).endswith("; point store= at a writable SQLite file")
