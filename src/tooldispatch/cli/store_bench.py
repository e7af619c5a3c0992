"""The table of ``tooldispatch bench dispatch --store URL`` (see ``tooldispatch.bench.store_bench``)."""

from __future__ import annotations

import json

import typer

from tooldispatch.errors import ConfigError


def print_store_bench(target: str, *, as_json: bool) -> None:
    """Run the store comparison and print it as a table or JSON."""
    from rich.console import Console
    from rich.table import Table

    from tooldispatch.bench.store_bench import POSTGRES_TARGET_US, run_store_bench, to_dicts

    try:
        figures = run_store_bench(target)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if as_json:
        typer.echo(json.dumps({"target_us": POSTGRES_TARGET_US, "stores": to_dicts(figures)}, indent=2))
        return
    workers = sorted({w for f in figures for w in f.calls_per_s})
    table = Table(title="durable side-effecting dispatch per store, measured side by side")
    for col in ("store", "durability", "median µs", "p95 µs", "target", *(f"calls/s, {w} workers" for w in workers)):
        table.add_column(col, justify="left" if col in ("store", "durability") else "right")
    for f in figures:
        verdict = ""
        if f.dialect == "postgresql":
            meets = f.median_us <= POSTGRES_TARGET_US
            verdict = f"≤ {POSTGRES_TARGET_US:g} " + ("[green]meets[/]" if meets else "[red]misses[/]")
        table.add_row(
            f.dialect,
            f.durability,
            f"{f.median_us:,.1f}",
            f"{f.p95_us:,.1f}",
            verdict,
            *(f"{f.calls_per_s.get(w, 0):,.0f}" for w in workers),
        )
    console = Console(width=180)
    console.print(table)
    for f in figures:
        console.print(f"{f.dialect}: {f.store}", highlight=False)
