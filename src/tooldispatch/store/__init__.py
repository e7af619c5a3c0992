"""SQLite state: idempotency records, traces and full results, approvals, quotas, freshness, the saga
journal, tool description hashes and benchmark runs. See ``migrations`` for how to add tables."""

from tooldispatch.store.migrations import MIGRATIONS, Migration, register_migration
from tooldispatch.store.sqlite import Store

__all__ = ["MIGRATIONS", "Migration", "Store", "register_migration"]
