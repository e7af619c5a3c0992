"""``tooldispatch store check|migrate`` on both stores, and the store option of ``run``."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tooldispatch.cli import app
from tooldispatch.store import MIGRATIONS, open_store, redact

pytestmark = pytest.mark.integration

runner = CliRunner()


def _empty(store_target: str) -> str:
    """An empty database of the target's kind: a zero-length SQLite file, or the new PostgreSQL database."""
    if "://" not in store_target:
        sqlite3.connect(store_target).close()
    return store_target


def test_check_migrate_check(store_target: str) -> None:
    """An empty store checks as pending (exit 1, unchanged); migrate applies every migration; then check is 0."""
    target = _empty(store_target)
    names = [m.name for m in MIGRATIONS]
    first = runner.invoke(app, ["store", "check", "--store", target])
    assert first.exit_code == 1
    assert first.stdout.splitlines()[1:] == ["applied: 0 migration(s)", f"pending: {', '.join(names)}"]
    assert first.stderr == f"run 'tooldispatch store migrate --store {redact(target)}' to apply them\n"
    again = runner.invoke(app, ["store", "check", "--store", target])
    assert again.exit_code == 1
    migrated = runner.invoke(app, ["store", "migrate", "--store", target])
    assert migrated.exit_code == 0, migrated.output
    assert migrated.stdout.splitlines()[0] == f"migrated: {', '.join(names)}"
    second = runner.invoke(app, ["store", "migrate", "--store", target])
    assert second.stdout.splitlines()[0] == "nothing to migrate"
    checked = runner.invoke(app, ["store", "check", "--store", target, "--json"])
    assert checked.exit_code == 0
    assert '"ok": true' in checked.stdout


def test_check_refuses_a_newer_schema(store_target: str) -> None:
    """A store with a core migration this build does not know: check exits 2 and says to upgrade."""
    store = open_store(store_target)
    store.execute("INSERT INTO schema_migrations (name, applied_at) VALUES ('core_9999_future', 'x')")
    store.close()
    out = runner.invoke(app, ["store", "check", "--store", store_target])
    assert out.exit_code == 2
    assert "newer than this build: core_9999_future" in out.stdout
    assert out.stderr == (
        "error: this store was written by a newer tooldispatch; upgrade tooldispatch here before using it\n"
    )
    migrate = runner.invoke(app, ["store", "migrate", "--store", store_target])
    assert migrate.exit_code == 2
    assert "has a schema newer than this tooldispatch (core_9999_future)" in migrate.stderr


def test_migrate_against_an_unreachable_server_names_the_fix() -> None:
    """No server on the port: one error line, exit 2, without the password."""
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install -e '.[dev]' installs it)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = runner.invoke(app, ["store", "migrate", "--store", f"postgresql://w:Hidden-77@127.0.0.1:{port}/d"])
    assert out.exit_code == 2
    assert out.stderr == (
        f"error: cannot reach the PostgreSQL store postgresql://w:***@127.0.0.1:{port}/d: Connection refused; "
        "start the server, or fix the host and port in the URL\n"
    )
    assert "Hidden-77" not in out.output


def test_run_takes_the_store_from_the_environment(tmp_path: Path) -> None:
    """``run`` opens the store named by TOOLDISPATCH_STORE: an unserved URL is one error line, exit 2."""
    out = runner.invoke(
        app,
        ["run", "hello", "--profile", "local-llama-cpp-python", "--base-url", "http://127.0.0.1:9/v1"],
        env={"TOOLDISPATCH_STORE": "mysql://a:Hidden-77@h/db", "COLUMNS": "300"},
    )
    assert out.exit_code == 2
    assert " ".join(out.output.split()) == (
        "error: the store mysql://a:***@h/db uses 'mysql', which tooldispatch does not serve; pass a SQLite file "
        "path or a postgresql:// URL"
    )
