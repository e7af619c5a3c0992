"""``tooldispatch bench cli-startup``: ``tooldispatch --help`` against ``llm --help`` and the interpreter floor."""

from __future__ import annotations

import json
from typing import Annotated

import typer


def bench_cli_startup(
    rounds: Annotated[int, typer.Option(min=1, help="Runs of each command, interleaved.")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """Start-up time of `tooldispatch --help`, side by side with `llm --help` and `python -c pass`."""
    from rich.console import Console
    from rich.table import Table

    from tooldispatch.bench.startup import TARGET_S, run

    try:
        rows = run(rounds)
    except (OSError, RuntimeError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    ours = next(r for r in rows if r.label == "tooldispatch --help")
    llm = next((r for r in rows if r.label == "llm --help"), None)
    if as_json:
        out = {
            "rows": [{"label": r.label, "median_s": r.median, "fastest_s": r.fastest, "runs": r.runs} for r in rows],
            "target_s": TARGET_S,
            "meets_target": ours.median <= TARGET_S,
            "ratio_to_llm": ours.median / llm.median if llm else None,
        }
        typer.echo(json.dumps(out, indent=2))
        return
    table = Table(title=f"start-up, {rounds} interleaved runs each (seconds)")
    for col in ("command", "median", "fastest", "vs tooldispatch --help"):
        table.add_column(col, justify="left" if col == "command" else "right")
    for r in rows:
        table.add_row(r.label, f"{r.median:.3f}", f"{r.fastest:.3f}", f"{r.median / ours.median:.2f}x")
    console = Console()
    console.print(table)
    verdict = "meets" if ours.median <= TARGET_S else "misses"
    console.print(f"tooldispatch --help: median {ours.median:.3f} s, target ≤ {TARGET_S} s: {verdict}", highlight=False)
    if llm is None:
        console.print("llm is not installed (pip install -e '.[dev]' installs it): compared with the floor only")
    else:
        console.print(
            f"tooldispatch --help / llm --help: {ours.median / llm.median:.2f}x (target ≤ 1)", highlight=False
        )


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``bench cli-startup``."""
    bench.command("cli-startup")(bench_cli_startup)
