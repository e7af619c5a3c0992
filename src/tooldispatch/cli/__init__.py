"""The ``tooldispatch`` command line: thin, it parses arguments and calls the library.

Each area keeps its commands in a module of this package exposing ``register(app, bench)``, where
``bench`` is the ``tooldispatch bench ...`` group.
"""

from __future__ import annotations

import importlib

import typer

from tooldispatch.errors import TooldispatchError

app = typer.Typer(
    name="tooldispatch",
    help="Run agents on local, quantized models: parse tool calls tolerantly, dispatch them safely, measure.",
    no_args_is_help=True,
    add_completion=False,
)
bench_app = typer.Typer(help="Benchmarks: each prints side-by-side ratios measured in one run.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")

_AREAS = (
    "parse",
    "parser_bench",
    "dispatch",
    "models",
    "serve",
    "agent",
    "backend_bench",
    "bench",
    "store",
    "mcp",
    "proxy",
)

for _area in _AREAS:
    importlib.import_module(f"{__name__}.{_area}").register(app, bench_app)


def main() -> None:
    """Entry point of the ``tooldispatch`` console script.

    An error of tooldispatch's own (a broken config, a dead server, a missing model) that a command did
    not report itself is printed as one ``error:`` line with exit code 2, not as a traceback.
    """
    try:
        app()
    except TooldispatchError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
