"""``tooldispatch store migrate|check``: the state store's schema, on SQLite or PostgreSQL.

``check`` changes nothing and exits 0 when the store is up to date with this build, 1 when migrations are
pending (run ``migrate``), 2 when it cannot be read or was written by a newer build. ``migrate`` applies
what is pending (it creates a SQLite file; a PostgreSQL database must exist). Stores are shown without
their passwords.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Annotated

import typer

from tooldispatch.errors import ConfigError
from tooldispatch.store import ENV_VAR, SchemaReport, open_store
from tooldispatch.store.url import is_postgres

StoreArg = Annotated[
    str | None,
    typer.Option(
        "--store",
        envvar=ENV_VAR,
        help="A SQLite file, or a postgresql://user:password@host:port/db URL (also read from TOOLDISPATCH_STORE). "
        "Default: the store runs are kept in.",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the report as JSON.")]


def _target(store: str | None) -> str:
    """The store given, else the one runs are kept in (the per-user home's, or the config's)."""
    from tooldispatch.home import data_dir, default_store

    if store:
        return store
    data_dir().mkdir(parents=True, exist_ok=True)
    return default_store()


def _inspect(target: str) -> SchemaReport | None:
    """The store's report without changing it; None for a SQLite file that does not exist yet."""
    if not is_postgres(target) and "://" not in target and not Path(target).exists():
        return None
    store = open_store(target, readonly=True, validate=False)
    try:
        return store.check()
    finally:
        store.close()


def _print(report: SchemaReport, as_json: bool) -> None:
    if as_json:
        typer.echo(json.dumps({**asdict(report), "ok": report.ok}, indent=2))
        return
    typer.echo(f"store {report.target} ({report.server})")
    typer.echo(
        f"applied: {len(report.applied)} migration(s)" + (f": {', '.join(report.applied)}" if report.applied else "")
    )
    if report.newer:
        typer.echo(f"newer than this build: {', '.join(report.newer)}")
    if report.pending:
        typer.echo(f"pending: {', '.join(report.pending)}")
    if report.ok:
        typer.echo("up to date with this build")


def store_check(store: StoreArg = None, as_json: JsonOpt = False) -> None:
    """Compare the store's schema with this build's, changing nothing (exit 0 up to date, 1 pending, 2 error)."""
    store = _target(store)
    try:
        report = _inspect(store)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if report is None:
        typer.echo(
            f"error: no state store at {store}; create it with 'tooldispatch store migrate --store {store}'", err=True
        )
        raise typer.Exit(2)
    _print(report, as_json)
    if report.newer:
        typer.echo(
            "error: this store was written by a newer tooldispatch; upgrade tooldispatch here before using it",
            err=True,
        )
        raise typer.Exit(2)
    if report.pending:
        typer.echo(f"run 'tooldispatch store migrate --store {report.target}' to apply them", err=True)
        raise typer.Exit(1)


def store_migrate(store: StoreArg = None, as_json: JsonOpt = False) -> None:
    """Apply this build's pending migrations (creating a SQLite file if needed); safe to run from many workers."""
    store = _target(store)
    try:
        before = _inspect(store)
        opened = open_store(store)
        try:
            after = opened.check()
        finally:
            opened.close()
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    done = [name for name in after.applied if before is None or name not in before.applied]
    if not as_json:
        typer.echo(f"migrated: {', '.join(done)}" if done else "nothing to migrate")
    _print(after, as_json)


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``tooldispatch store ...`` to the command line."""
    store_app = typer.Typer(
        help="The state store shared by dispatchers: a SQLite file or a PostgreSQL database.", no_args_is_help=True
    )
    store_app.command("check")(store_check)
    store_app.command("migrate")(store_migrate)
    app.add_typer(store_app, name="store")
