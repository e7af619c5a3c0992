"""Help text as people read it: ``--model MODEL``, ``TASK``, not typer's ``<str>`` and ``{task}`` tags.

Typer writes each option's Python type next to it (``--tools <list[str]>``) and required arguments in
braces. :func:`plain_help` walks the built click command once, before it runs, and gives every option and
argument without a metavar of its own the conventional one: its name in capitals. Options with a fixed set of
values declare it as their metavar (``--constrained off|on|required``).
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperCommand, TyperGroup


class PlainCommand(TyperCommand):
    """A typer command that names its arguments plainly (``TASK``, ``[FILE]``, ``FILES...``), without type tags."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if isinstance(param, TyperArgument) and not param.hidden:
                name = param.metavar or (param.name or "").upper()
                if param.nargs != 1:
                    name += "..."
                pieces.append(name if param.required else f"[{name}]")
            else:
                pieces.extend(param.get_usage_pieces(ctx))
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        args, opts = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if isinstance(param, TyperArgument):
                args.append((param.metavar or (param.name or "").upper(), record[1]))
            else:
                opts.append(record)
        if args:
            with formatter.section("Arguments"):
                formatter.write_dl(args)
        if opts:
            with formatter.section("Options"):
                formatter.write_dl(opts)


def plain_help(command: Any, *, subcommands: bool = True) -> None:
    """Give every parameter of ``command`` (and of its subcommands, unless told not to) a plain metavar."""
    if type(command) is TyperCommand:
        command.__class__ = PlainCommand  # same object, one method replaced: the usage line
    for param in command.params:
        is_flag = getattr(param, "is_flag", False) or getattr(param, "count", False)
        if param.metavar is None and not is_flag:
            param.metavar = (param.name or "value").upper()
    if subcommands and isinstance(command, TyperGroup):
        for sub in command.commands.values():
            plain_help(sub)
