"""Choosing a store from a path or URL, and the errors a user meets: each one line, naming the fix, no secrets."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import pytest

import pg_server
from tooldispatch.dispatch import Dispatcher, Registry
from tooldispatch.errors import ConfigError
from tooldispatch.store import SQLiteStore, open_store, redact

pytestmark = pytest.mark.integration

SECRET = "s3cr3t-Pa55"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unserved_url_is_refused_and_creates_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database URL this build does not serve is a ConfigError, not a SQLite file under a folder named after it."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as caught:
        Dispatcher(Registry(), store=f"mysql://app:{SECRET}@db.example/tools")
    assert str(caught.value) == (
        "the store mysql://app:***@db.example/tools uses 'mysql', which tooldispatch does not serve; pass a SQLite "
        "file path or a postgresql:// URL"
    )
    assert list(tmp_path.iterdir()) == []


def test_sqlite_url_names_the_fix() -> None:
    """A sqlite:// URL is refused with what to pass instead."""
    with pytest.raises(ConfigError) as caught:
        open_store("sqlite:///var/lib/state.db")
    assert str(caught.value) == (
        "the store 'sqlite:///var/lib/state.db' is a SQLite URL; pass the file's path itself (e.g. state.db)"
    )


def test_paths_open_sqlite() -> None:
    """A plain path or ``:memory:`` opens the SQLite store."""
    store = open_store(":memory:")
    assert isinstance(store, SQLiteStore) and store.dialect == "sqlite"
    store.close()


def test_redact_hides_every_password_form() -> None:
    """The password in the netloc or the query becomes ***; paths and user names are kept."""
    assert redact(f"postgresql://u:{SECRET}@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert redact(f"postgresql://h/db?user=u&password={SECRET}&sslmode=require") == (
        "postgresql://h/db?user=u&password=***&sslmode=require"
    )
    assert redact("postgresql://u@h/db") == "postgresql://u@h/db"
    assert redact("state.db") == "state.db"


def test_unreachable_server_names_the_fix(caplog: pytest.LogCaptureFixture) -> None:
    """Nothing listening on the port: one line saying to start the server or fix host and port, no password."""
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install -e '.[dev]' installs it)")
    port = _free_port()
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ConfigError) as caught:
        open_store(f"postgresql://app:{SECRET}@127.0.0.1:{port}/tools")
    assert str(caught.value) == (
        f"cannot reach the PostgreSQL store postgresql://app:***@127.0.0.1:{port}/tools: Connection refused; "
        "start the server, or fix the host and port in the URL"
    )
    assert SECRET not in caplog.text


def test_wrong_credentials_name_the_fix_and_never_show_them(
    pg_server: pg_server.Server, caplog: pytest.LogCaptureFixture
) -> None:
    """A wrong password is one line naming where credentials go; neither password reaches the error or logs."""
    caplog.set_level(logging.DEBUG)
    url = pg_server.url("postgres", password=SECRET)
    with pytest.raises(ConfigError) as caught:
        open_store(url)
    assert str(caught.value) == (
        f"the PostgreSQL store postgresql://tooldispatch:***@127.0.0.1:{pg_server.port}/postgres refused the user "
        "name or password; fix the credentials in the URL (or PGPASSWORD, ~/.pgpass)"
    )
    assert SECRET not in caplog.text and SECRET not in repr(caught.value)


def test_missing_database_names_the_fix(pg_server: pg_server.Server) -> None:
    """A database that does not exist is one line saying to create it."""
    with pytest.raises(ConfigError) as caught:
        open_store(pg_server.url("nowhere"))
    assert str(caught.value) == (
        f"the PostgreSQL store postgresql://tooldispatch:***@127.0.0.1:{pg_server.port}/nowhere has no such "
        "database; create it first (createdb) or fix the URL's path"
    )
    assert pg_server.password not in str(caught.value)


def test_a_working_store_never_shows_its_password(
    pg_server: pg_server.Server, pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The store's target, repr and check report, and every log line of a dispatch, hold no password."""
    caplog.set_level(logging.DEBUG)
    with Dispatcher(Registry(), store=pg_url) as d:
        assert pg_server.password not in d.store.target
        assert pg_server.password not in repr(d.store)
        assert pg_server.password not in str(d.store.check())
        assert d.store.target == pg_url.replace(pg_server.password, "***")
    assert pg_server.password not in caplog.text


def test_read_only_open_refuses_a_foreign_database(pg_server: pg_server.Server) -> None:
    """A PostgreSQL database without the tooldispatch schema is refused read-only, and left without tables."""
    url = pg_server.create_database("foreign_app")
    with pytest.raises(ConfigError) as caught:
        open_store(url, readonly=True)
    assert str(caught.value).endswith(
        "/foreign_app is not a tooldispatch state store (it has no tooldispatch schema); run "
        "'tooldispatch store migrate --store URL' to create one"
    )
    import psycopg

    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT to_regclass('schema_migrations')").fetchone() == (None,)


def test_a_lost_connection_is_one_error_and_the_next_call_reconnects(pg_server: pg_server.Server, pg_url: str) -> None:
    """The server ending the store's sessions gives StoreUnavailable, without the password; the store then recovers."""
    import psycopg

    from tooldispatch.errors import StoreUnavailable

    store = open_store(pg_url)
    assert store.fetchone("SELECT 1") == (1,)
    dbname = pg_url.rsplit("/", 1)[1]
    with psycopg.connect(pg_server.url("postgres"), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (dbname,))
    with pytest.raises(StoreUnavailable) as caught:
        store.fetchone("SELECT 1")
    message = str(caught.value)
    assert message.startswith(f"the PostgreSQL store {redact(pg_url)} failed: ")
    assert message.endswith("; check that the server is running, then retry")
    assert pg_server.password not in message and "\n" not in message
    assert store.fetchone("SELECT 2") == (2,)
    store.close()


def test_url_scheme_spellings_open_the_same_store(pg_url: str) -> None:
    """postgres://, postgresql:// and postgresql+psycopg:// name the same PostgreSQL store."""
    rest = pg_url.split("://", 1)[1]
    for scheme in ("postgres", "postgresql", "postgresql+psycopg"):
        store = open_store(f"{scheme}://{rest}")
        assert store.dialect == "postgresql" and store.check().ok
        store.close()
