"""``tooldispatch config`` (the per-user config file) and ``tooldispatch logs`` (the runs kept in the store)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

import typer

from tooldispatch.cli.options import JsonOpt, StoreOpt
from tooldispatch.errors import TooldispatchError

config_app = typer.Typer(
    help="Defaults for run and chat, and model aliases, in the per-user config file (XDG).", no_args_is_help=True
)


def _fail(exc: Exception) -> typer.Exit:
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(2)


@config_app.command("list")
def config_list(as_json: JsonOpt = False) -> None:
    """Every key with its value (or unset) and what it means; then the aliases."""
    from tooldispatch.home import KEYS, config_path, load_config

    try:
        config = load_config()
    except TooldispatchError as exc:
        raise _fail(exc) from exc
    if as_json:
        typer.echo(json.dumps({"path": str(config_path()), **config}, indent=2))
        return
    typer.echo(f"# {config_path()}")
    for key, spec in KEYS.items():
        value = config.get(key)
        shown = json.dumps(value) if value is not None else "(unset)"
        typer.echo(f"{key} = {shown}    # {spec.help}")
    for name, target in sorted((config.get("aliases") or {}).items()):
        typer.echo(f"alias {name} = {target}")


@config_app.command("get")
def config_get(key: Annotated[str, typer.Argument(help="A key (tooldispatch config list shows them).")]) -> None:
    """Print one key's value (exit 1 when it is unset)."""
    from tooldispatch.home import KEYS, default_store, load_config

    try:
        config = load_config()
    except TooldispatchError as exc:
        raise _fail(exc) from exc
    if key not in KEYS:
        raise _fail(ValueError(f"unknown key {key!r}; known keys: {', '.join(KEYS)}"))
    value = config.get(key)
    if value is None and key == "store":
        value = default_store()
    if value is None:
        raise typer.Exit(1)
    typer.echo(str(value))


@config_app.command("set")
def config_set(
    key: Annotated[str, typer.Argument(help="A key (tooldispatch config list shows them).")],
    value: Annotated[str, typer.Argument(help="Its new value.")],
) -> None:
    """Set one key in the config file."""
    from tooldispatch.home import load_config, parse_value, save_config

    try:
        config = load_config()
        config[key] = parse_value(key, value)
        path = save_config(config)
    except TooldispatchError as exc:
        raise _fail(exc) from exc
    typer.echo(f"{key} = {json.dumps(config[key])} in {path}")


@config_app.command("unset")
def config_unset(key: Annotated[str, typer.Argument(help="A key to remove from the config file.")]) -> None:
    """Remove one key from the config file (the built-in default applies again)."""
    from tooldispatch.home import load_config, save_config

    try:
        config = load_config()
        config.pop(key, None)
        save_config(config)
    except TooldispatchError as exc:
        raise _fail(exc) from exc


@config_app.command("path")
def config_path_cmd() -> None:
    """Print where the config file, your own manifests and profiles, the data folder and the model cache are."""
    from tooldispatch.home import config_path, data_dir, default_store, models_dir, user_models_dir, user_profiles_dir

    try:
        cache = models_dir()
    except TooldispatchError as exc:
        raise _fail(exc) from exc
    typer.echo(
        f"config:   {config_path()}\nmodels:   {user_models_dir()} (your manifests)\n"
        f"profiles: {user_profiles_dir()}\ndata:     {data_dir()}\nstore:    {default_store()}\ncache:    {cache}"
    )


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M:%S")


def logs(
    run_id: Annotated[
        str | None, typer.Argument(metavar="[RUN]", help="Show this run in full (an id or its start).")
    ] = None,
    count: Annotated[int, typer.Option("-n", "--count", min=1, help="How many recent runs to list.")] = 10,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List the most recent runs of run and chat (task, model, profile, outcome, calls, repairs, time),
    or show one in full."""
    from tooldispatch.home import default_store
    from tooldispatch.runlog import get, recent
    from tooldispatch.store import open_store

    target = store or default_store()
    from pathlib import Path

    if "://" not in target and not Path(target).is_file():
        if run_id is not None:
            raise _fail(ValueError(f"no runs kept yet in {target}; `tooldispatch run TASK` keeps its runs there"))
        typer.echo("[]" if as_json else f"no runs kept yet in {target}")
        return
    try:
        st = open_store(target, readonly=True)
        try:
            if run_id is not None:
                record = get(st, run_id)
                data: Any = {**record.summary(), "messages": record.messages, "transcript": record.transcript}
                typer.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str) if as_json else _show(record))
                return
            records = recent(st, count)
        finally:
            st.close()
    except TooldispatchError as exc:
        raise _fail(exc) from exc
    if as_json:
        typer.echo(json.dumps([r.summary() for r in records], indent=2, ensure_ascii=False))
        return
    if not records:
        typer.echo(f"no runs kept yet in {target}")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"runs in {target} (newest first)")
    for col in ("run", "started", "task", "model", "profile", "ended", "calls", "repairs", "s"):
        table.add_column(col, justify="right" if col in ("calls", "repairs", "s") else "left", overflow="fold")
    for r in records:
        ended = r.end_reason + (f" ({r.pending} pending)" if r.pending else "")
        table.add_row(
            r.id,
            _when(r.started_at),
            r.task if len(r.task) <= 60 else r.task[:59] + "…",
            r.model,
            r.profile,
            ended,
            str(r.calls),
            str(r.repairs),
            f"{r.wall_s:.1f}",
        )
    Console(width=160).print(table)


def _show(record: Any) -> str:
    lines = [
        f"run {record.id}  session {record.session_id}  {_when(record.started_at)}",
        f"task: {record.task}",
        f"model {record.model}, profile {record.profile}, settings {json.dumps(record.settings)}",
        f"ended: {record.end_reason} (exit {record.exit_code}); {record.calls} call(s), {record.repairs} repair(s), "
        f"{record.rejected} rejected candidate(s), {record.pending} awaiting approval; {record.wall_s:.1f} s",
    ]
    stuck = record.transcript.get("stuck")
    if stuck:
        turns = ", ".join(str(t + 1) for t in stuck["turns"])
        lines.append(f"stuck: {stuck['kind']} in turns {turns}: {stuck['what']}")
    if record.transcript.get("answered_by") == "repeat_guard":
        lines.append("answered by the repeat guard: generated with calls disabled, not the model's first choice")
    for turn in record.transcript.get("turns", []):
        for note in turn.get("notes", []):
            lines.append(f"  turn {turn['index'] + 1}: {note}")
        for held in turn.get("held", []):
            call = held["call"]
            lines.append(
                f"  held {call['name']} {json.dumps(call['arguments'], ensure_ascii=False)} "
                f"(answered in turn {held['answered_in'] + 1}): not dispatched"
            )
        for run in turn.get("tool_runs", []):
            call = run["call"]
            lines.append(f"  call {call['name']} {json.dumps(call['arguments'], ensure_ascii=False)} → {run['status']}")
    if record.final_answer:
        lines.append(f"answer: {record.final_answer}")
    return "\n".join(lines)


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``config`` and ``logs``."""
    del bench
    app.add_typer(config_app, name="config")
    app.command("logs")(logs)
