"""``tooldispatch serve --profile NAME`` and ``tooldispatch profiles``.

Thin: the profile is loaded and planned by ``tooldispatch.profiles``; this module prints, launches, waits
and tells the user how to point ``run`` at the server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tooldispatch.errors import BackendUnavailable, ConfigError

ProfileOpt = Annotated[
    str, typer.Option("--profile", "-p", help="A profile name (see `tooldispatch profiles`) or a path to a TOML file.")
]


def _fail(exc: Exception, code: int) -> typer.Exit:
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(code)


def serve(
    profile: ProfileOpt,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the exact command and exit.")] = False,
    port: Annotated[int | None, typer.Option("--port", help="Listen on this port instead of the profile's.")] = None,
    host: Annotated[str | None, typer.Option("--host", help="Listen on this address instead of the profile's.")] = None,
    launcher: Annotated[
        str | None, typer.Option("--launcher", help="An alternative launch form of the profile (e.g. container).")
    ] = None,
    model_path: Annotated[
        str | None, typer.Option("--model-path", help="GGUF file for llama.cpp servers, instead of the profile's.")
    ] = None,
    log: Annotated[
        Path | None, typer.Option("--log", help="Server log file (default: logs/ in the data folder, config path).")
    ] = None,
    ready_timeout: Annotated[
        float | None, typer.Option("--ready-timeout", help="Seconds to wait for /v1/models to answer.")
    ] = None,
) -> None:
    """Start the server a profile describes, wait until /v1/models answers, and say how to use it."""
    from rich.console import Console

    from tooldispatch.profiles import (
        load_profile,
        models_answer,
        plan_launch,
        start_server,
        stop_server,
        wait_until_ready,
    )

    console = Console(highlight=False, soft_wrap=True)
    try:
        prof = load_profile(profile)
        plan = plan_launch(prof, launcher=launcher, host=host, port=port, model_path=model_path)
    except ConfigError as exc:
        raise _fail(exc, 2) from exc
    if dry_run:
        typer.echo(plan.command_line)
        return
    if models_answer(plan.base_url):
        raise _fail(
            ConfigError(f"a server already answers on {plan.base_url}; use it, or pick another --port"),
            2,
        )
    from tooldispatch.home import data_dir

    log_path = log or data_dir() / "logs" / f"{plan.profile}-{plan.port}.log"
    console.print(f"[bold]starting[/bold] {plan.command_line}")
    console.print(f"log: {log_path}")
    try:
        process = start_server(plan, log_path=log_path)
    except ConfigError as exc:
        raise _fail(exc, 2) from exc
    try:
        with console.status(f"waiting for {plan.base_url}/models to answer ..."):
            took = wait_until_ready(plan, process, log_path=log_path, timeout_s=ready_timeout)
    except BackendUnavailable as exc:
        stop_server(process)
        raise _fail(exc, 1) from exc
    except KeyboardInterrupt:
        stop_server(process)
        raise typer.Exit(130) from None
    try:  # Ctrl+C from the moment the server is up, even while these lines print, stops it
        console.print(
            f"[green]ready[/green] on {plan.base_url} after {took:.1f} s (pid {process.pid}). Point the agent at it:"
        )
        if port is None and host is None:
            console.print(f'  tooldispatch run "TASK" --profile {prof.name}')
        console.print(f'  tooldispatch run "TASK" --profile {prof.name} --base-url {plan.base_url}')
        console.print("Press Ctrl+C to stop the server.")
        code = process.wait()
    except KeyboardInterrupt:
        stop_server(process)
        console.print("server stopped")
        return
    raise _fail(BackendUnavailable(f"the server exited with code {code}; see {log_path}"), 1)


def profiles(as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False) -> None:
    """List the deployment profiles: shipped, and your own in ~/.config/tooldispatch/profiles (yours win by name)."""
    import json

    from rich.console import Console
    from rich.table import Table

    from tooldispatch.packaged import legend
    from tooldispatch.profiles import load_profile, profile_entries

    rows = []
    for name, entry in profile_entries().items():
        row: dict[str, object] = {"profile": name, "from": entry.origin, "path": str(entry.path)}
        try:
            prof = load_profile(entry.path)
        except ConfigError as exc:
            rows.append({**row, "backend": "invalid", "description": str(exc), "model": None})
            continue
        rows.append({**row, "backend": prof.backend, "description": prof.description, "model": prof.model})
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table("profile", "from", "backend", "model", "description", caption=legend("profiles"))
    for row in rows:
        backend = "[red]invalid[/red]" if row["backend"] == "invalid" else str(row["backend"])
        table.add_row(str(row["profile"]), str(row["from"]), backend, str(row["model"] or ""), str(row["description"]))
    Console(soft_wrap=True).print(table)


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``serve`` and ``profiles`` to the command line."""
    app.command("serve")(serve)
    app.command("profiles")(profiles)
