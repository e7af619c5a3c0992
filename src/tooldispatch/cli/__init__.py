"""The ``tooldispatch`` command line: thin, it parses arguments and calls the library.

Each area keeps its commands in a module of this package exposing ``register(app, bench)``, where
``bench`` is the ``tooldispatch bench ...`` group. Area modules import only ``typer`` and light modules at
the top: what a command needs (the backends, the dispatcher, ``rich``, ``openai``) is imported inside that
command, so ``tooldispatch --help`` and shell completion start fast (``tooldispatch bench cli-startup``
measures it; ``tests/unit/cli/test_startup.py`` pins that ``openai`` and ``llama_cpp`` stay out).

Exit codes of every command: 0 success; 1 the command ran and the answer is "no" (a check failed, nothing
found); 2 bad input or configuration (the one-line message says what to fix); ``run`` and ``chat`` add the
codes of :mod:`tooldispatch.cli.exits`.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

import typer

from tooldispatch.cli._lazy import lazy_root
from tooldispatch.errors import TooldispatchError

app = typer.Typer(
    name="tooldispatch",
    help="Run agents on local, quantized models: parse tool calls tolerantly, dispatch them safely, measure.",
    no_args_is_help=True,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
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
    "chat",
    "backend_bench",
    "bench",
    "store",
    "mcp",
    "proxy",
    "home",
    "startup_bench",
    "prefix_bench",
)

for _area in _AREAS:
    importlib.import_module(f"{__name__}.{_area}").register(app, bench_app)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"tooldispatch {version('tooldispatch')}")
        except PackageNotFoundError:
            typer.echo("tooldispatch (not installed: run `pip install -e .`)")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Run agents on local, quantized models: parse tool calls tolerantly, dispatch them safely, measure."""


def command() -> Any:
    """The ``tooldispatch`` click command: subcommands built when used, help text without type tags."""
    return lazy_root(app)


def _click_error() -> type[Exception]:
    """click's ``ClickException`` (typer vendors click and exports only some of its exceptions)."""
    return next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")


def main(args: list[str] | None = None) -> None:
    """Entry point of the ``tooldispatch`` console script.

    Every error is one ``error:`` line on stderr, never a traceback: a usage error (unknown option, bad
    value) names the ``--help`` to read and exits 2; an error of tooldispatch's own (a broken config, a
    dead server, a missing model) that a command did not report itself exits 2; any other exception exits
    70 (``TOOLDISPATCH_DEBUG=1`` shows its traceback).
    """
    click_error = _click_error()
    try:
        code = command().main(args, prog_name="tooldispatch", standalone_mode=False)
    except click_error as exc:
        ctx = getattr(exc, "ctx", None)
        usage = ctx is not None and type(exc).__name__ != "ClickException"
        where = f"; see '{ctx.command_path} --help'" if usage and ctx is not None else ""
        message = str(exc.format_message()).rstrip(".")  # type: ignore[attr-defined]
        typer.echo(f"error: {message}{where}", err=True)
        raise SystemExit(getattr(exc, "exit_code", 2)) from None
    except typer.Abort:
        typer.echo("aborted", err=True)
        raise SystemExit(130) from None
    except TooldispatchError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise SystemExit(2) from None
    except Exception as exc:
        if os.environ.get("TOOLDISPATCH_DEBUG"):
            raise
        typer.echo(
            f"error: unexpected {type(exc).__name__}: {exc} (a bug in tooldispatch; TOOLDISPATCH_DEBUG=1 shows "
            "the traceback to report)",
            err=True,
        )
        raise SystemExit(70) from None
    raise SystemExit(code if isinstance(code, int) else 0)
