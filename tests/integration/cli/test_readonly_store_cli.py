"""Read-only commands (trace list|show|stats, approvals list) open the store for reading only."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tooldispatch.cli import app
from tooldispatch.dispatch import Dispatcher, Registry

runner = CliRunner()

READ_ONLY = [["trace", "list"], ["trace", "show", "ab"], ["trace", "stats"], ["approvals", "list"]]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("command", READ_ONLY, ids=lambda c: " ".join(c))
def test_fault5_read_only_commands_leave_a_foreign_sqlite_file_untouched(tmp_path: Path, command: list[str]) -> None:
    """Another program's SQLite file is refused in one line; no table is created and it is not switched to WAL."""
    other = tmp_path / "app.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO users (name) VALUES ('ada')")
    conn.commit()
    conn.close()
    before = _digest(other)
    out = runner.invoke(app, [*command, "--store", str(other)])
    assert out.exit_code == 2
    assert out.output == (
        f"error: {other} is not a tooldispatch state store (it has no tooldispatch schema); pass --store with the "
        "file given to Dispatcher(store=...)\n"
    )
    assert _digest(other) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]
    conn = sqlite3.connect(other)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    assert conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall() == [("users",)]
    conn.close()


def test_read_only_commands_do_not_migrate_a_store(tmp_path: Path) -> None:
    """A store lacking a migration this build adds later is read as it is: its migration record is not changed."""
    store = tmp_path / "state.db"
    Dispatcher(Registry(), store=store).close()
    conn = sqlite3.connect(store)
    conn.execute("CREATE TABLE IF NOT EXISTS keep (x INTEGER)")
    conn.execute("INSERT INTO schema_migrations (name, applied_at) VALUES ('zz_0001_other_module', 'x')")
    conn.commit()
    conn.close()
    before = _digest(store)
    out = runner.invoke(app, ["trace", "list", "--store", str(store)])
    assert out.exit_code == 0, out.output
    assert "traces in" in out.output
    assert _digest(store) == before


def test_an_old_store_is_read_only_after_migrating(tmp_path: Path) -> None:
    """A store without one of this build's core migrations names the migrate command instead of migrating it."""
    store = tmp_path / "state.db"
    Dispatcher(Registry(), store=store).close()
    conn = sqlite3.connect(store)
    conn.execute("DELETE FROM schema_migrations WHERE name = 'core_0003_trace_order'")
    conn.commit()
    conn.close()
    out = runner.invoke(app, ["approvals", "list", "--store", str(store)])
    assert out.exit_code == 2
    assert out.output == (
        f"error: the state store {store} was made by an older tooldispatch and lacks core_0003_trace_order; "
        f"run 'tooldispatch store migrate --store {store}' first\n"
    )
