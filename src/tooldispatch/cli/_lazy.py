"""A root command that builds only the subcommand it runs.

Typer turns every command of an app into a click command (reading each function's signature) before it
parses anything; with some sixty commands that is most of the start-up time of ``tooldispatch --help``.
:func:`lazy_root` builds the root group with its own options only, and gives it a mapping of subcommands
that builds each one on first use (through typer's ``get_command`` on a one-command app, or
``get_group_from_info`` for a sub-app, as typer itself builds it), so a run builds one command and the
root help reads the first line of each docstring.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, MutableMapping
from typing import Any

import typer
from typer.core import TyperGroup
from typer.models import CommandInfo, TyperInfo

from tooldispatch.cli._help import plain_help


def _name(info: CommandInfo | TyperInfo) -> str:
    if info.name:
        return str(info.name)
    callback = info.callback
    return callback.__name__.lower().replace("_", "-") if callback else ""


def _help(info: CommandInfo | TyperInfo) -> str:
    if isinstance(info, TyperInfo) and info.typer_instance is not None:
        own = info.typer_instance.info.help
        text = info.help if isinstance(info.help, str) else own if isinstance(own, str) else None
    else:
        text = info.help if isinstance(info.help, str) else None
    if text is None and info.callback is not None:
        text = inspect.getdoc(info.callback)
    return inspect.cleandoc(text or "")


def _hidden(info: CommandInfo | TyperInfo) -> bool:
    return info.hidden is True


def _short(text: str, limit: int) -> str:
    """The first sentence of the first paragraph, cut to ``limit`` characters."""
    first = " ".join(text.split("\n\n")[0].split())
    end = first.find(". ")
    if end != -1:
        first = first[: end + 1]
    return first if len(first) <= limit else first[: max(limit - 3, 1)].rstrip() + "..."


class _Commands(MutableMapping[str, Any]):
    """Subcommands by name, each built the first time it is looked up."""

    def __init__(self, app: typer.Typer) -> None:
        self.infos: dict[str, CommandInfo | TyperInfo] = {}
        infos: list[CommandInfo | TyperInfo] = [*app.registered_commands, *app.registered_groups]
        for info in infos:
            self.infos[_name(info)] = info
        self.built: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self.built:
            info = self.infos[name]
            cmd: Any
            if isinstance(info, TyperInfo):
                sub = info.typer_instance
                assert sub is not None
                sub.rich_markup_mode = None  # plain click help, as at the root (rich's formatter is slow to import)
                sub.pretty_exceptions_enable = False
                cmd = typer.main.get_group_from_info(
                    info, pretty_exceptions_short=True, suggest_commands=True, rich_markup_mode=None
                )
            else:
                one = typer.Typer(add_completion=False, rich_markup_mode=None, pretty_exceptions_enable=False)
                one.registered_commands.append(info)
                cmd = typer.main.get_command(one)
            plain_help(cmd)
            self.built[name] = cmd
        return self.built[name]

    def __setitem__(self, name: str, value: Any) -> None:
        self.built[name] = value
        self.infos.setdefault(name, CommandInfo(name=name))

    def __delitem__(self, name: str) -> None:
        self.infos.pop(name)
        self.built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self.infos)

    def __len__(self) -> int:
        return len(self.infos)


class LazyRoot(TyperGroup):
    """The root group: subcommands built on demand; its help lists them from their docstrings."""

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        table = self.commands
        assert isinstance(table, _Commands)
        rows = [(name, _help(info)) for name, info in table.infos.items() if not _hidden(info)]
        if not rows:
            return
        limit = formatter.width - 6 - max(len(name) for name, _ in rows)
        with formatter.section("Commands"):
            formatter.write_dl([(name, _short(text, limit)) for name, text in sorted(rows)])


def lazy_root(app: typer.Typer) -> Any:
    """The click group of ``app``: its own callback and options now, each subcommand when it is used."""
    shell = typer.Typer(
        name=app.info.name if isinstance(app.info.name, str) else None,
        help=app.info.help if isinstance(app.info.help, str) else None,
        no_args_is_help=True,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
        add_completion=True,
        cls=LazyRoot,
    )
    if app.registered_callback is not None:
        shell.registered_callback = app.registered_callback
    root = typer.main.get_command(shell)
    assert isinstance(root, LazyRoot)
    plain_help(root, subcommands=False)
    root.commands = _Commands(app)
    return root
