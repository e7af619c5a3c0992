"""Choosing a store from what a user passes: a SQLite path, or a database URL.

``open_store("state.db")`` and ``open_store(":memory:")`` give a ``SQLiteStore``;
``open_store("postgresql://user:pw@host:5432/db")`` (or ``postgres://``) gives a ``PostgresStore``.
Any other ``scheme://`` is refused with a message naming what is served, so a URL never silently becomes a
file path. The command line takes the same value from ``--store`` or ``TOOLDISPATCH_STORE``.

A URL is shown through ``redact`` (``store/redact.py``): its password becomes ``***``.
"""

from __future__ import annotations

import re
from pathlib import Path

from tooldispatch.errors import ConfigError
from tooldispatch.store.base import StateStore
from tooldispatch.store.redact import URL, redact

ENV_VAR = "TOOLDISPATCH_STORE"
"""The environment variable the command line reads the store from when ``--store`` is not given."""

_POSTGRES = re.compile(r"^postgres(?:ql)?(?:\+[A-Za-z0-9]+)?:", re.IGNORECASE)


def is_postgres(target: str | Path) -> bool:
    """Whether ``target`` names a PostgreSQL store."""
    return isinstance(target, str) and _POSTGRES.match(target) is not None


def open_store(target: str | Path | StateStore, *, readonly: bool = False, validate: bool = True) -> StateStore:
    """The store ``target`` names, opened (and migrated unless ``readonly``).

    Args:
        target: a SQLite file path, ``":memory:"``, a ``postgresql://`` URL, or an open store (returned as is).
        readonly: open an existing store for reading only: nothing is created or migrated, and a database
            that is not a tooldispatch store is refused.
        validate: ``False`` with ``readonly`` opens any database of the right kind, to inspect it (``check()``).

    Raises:
        ConfigError: the URL's scheme is not served, the PostgreSQL driver is not installed, or the store
            cannot be opened (each message says what to do).
    """
    if not isinstance(target, str | Path):
        return target
    text = str(target)
    if is_postgres(text):
        try:
            from tooldispatch.store.postgres import PostgresStore
        except ImportError as exc:
            raise ConfigError(
                f"the store {redact(text)} needs the PostgreSQL driver: pip install 'tooldispatch[postgres]'"
            ) from exc
        return PostgresStore(text, readonly=readonly, validate=validate)
    if text.lower().startswith("sqlite:"):
        raise ConfigError(f"the store {text!r} is a SQLite URL; pass the file's path itself (e.g. state.db)")
    if URL.match(text) or text.lower().startswith(("mysql:", "mariadb:")):
        scheme = text.split(":", 1)[0]
        raise ConfigError(
            f"the store {redact(text)} uses {scheme!r}, which tooldispatch does not serve; pass a SQLite file "
            "path or a postgresql:// URL"
        )
    from tooldispatch.store.sqlite import SQLiteStore

    return SQLiteStore(text, readonly=readonly, validate=validate)
