"""The dispatcher's durable state: idempotency records, traces and full results, approvals, quotas,
freshness, the saga journal, tool description hashes and benchmark runs.

One seam (``StateStore``), two stores: ``SQLiteStore`` (one file, the embedded default; also named
``Store``) and ``PostgresStore`` (a server shared by many workers; ``pip install 'tooldispatch[postgres]'``).
``open_store`` picks one from a path or URL. See ``migrations`` for how to add tables.
"""

from tooldispatch.store.base import SchemaReport, StateStore
from tooldispatch.store.migrations import MIGRATIONS, Migration, register_migration
from tooldispatch.store.redact import redact
from tooldispatch.store.sqlite import SQLiteStore, Store
from tooldispatch.store.url import ENV_VAR, open_store

__all__ = [
    "ENV_VAR",
    "MIGRATIONS",
    "Migration",
    "SQLiteStore",
    "SchemaReport",
    "StateStore",
    "Store",
    "open_store",
    "redact",
    "register_migration",
]
