"""``tooldispatch parse``: run the parser on one raw model output and print the outcome as JSON."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from tooldispatch.errors import ConfigError

if TYPE_CHECKING:
    from tooldispatch.types import RepairLevel


def _load_tools(path: Path) -> list[Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"tools file {str(path)!r} does not exist; pass --tools with a JSON file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read tools file {str(path)!r}: {exc}") from exc
    except ValueError as exc:
        raise ConfigError(f"tools file {str(path)!r} is not valid JSON: {exc}") from exc
    if isinstance(data, dict) and isinstance(data.get("tools"), list):
        data = data["tools"]
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise ConfigError(
            f"tools file {str(path)!r} must hold a JSON list of tools "
            '([{"type": "function", "function": {"name": ..., "parameters": {...}}}])'
        )
    return data


def _read_stdin() -> tuple[str, str | None]:
    """Stdin as text, and a note when bytes that are not UTF-8 were replaced with U+FFFD."""
    buffer = getattr(sys.stdin, "buffer", None)
    if buffer is None:
        return sys.stdin.read(), None
    data = buffer.read()
    text = data.decode("utf-8", errors="replace")
    bad = text.count("\ufffd") - data.count("\ufffd".encode())
    if not bad:
        return text, None
    return text, (
        f"stdin held {bad} byte sequences that are not UTF-8; each was read as U+FFFD (the replacement character)"
    )


def parse_command(
    tools: Annotated[
        Path,
        typer.Option("--tools", help='JSON file with the OpenAI tools list (or {"tools": [...]}, or one tool).'),
    ],
    tool_format: Annotated[
        str, typer.Option("--format", help="Tool-call format: auto, or one name such as hermes, mistral, harmony.")
    ] = "auto",
    finish_reason: Annotated[
        str | None,
        typer.Option("--finish-reason", help="The server's finish reason; 'length' marks cut-off calls Truncated."),
    ] = None,
    reasoning_open: Annotated[
        bool, typer.Option("--reasoning-open", help="The prompt already opened <think>: the output starts inside it.")
    ] = False,
    repair: Annotated[str, typer.Option("--repair", help="Repair level: bounded, lossless or none.")] = "bounded",
) -> None:
    """Parse a raw model output read from stdin and print what was found as JSON.

    Example: tooldispatch parse --tools tools.json < raw.txt
    """
    from tooldispatch.parsing.core import parse_tool_calls

    try:
        declared = _load_tools(tools)
        text, note = _read_stdin()
        if repair not in ("bounded", "lossless", "none"):
            raise ConfigError(f"unknown --repair {repair!r}; use bounded, lossless or none")
        outcome = parse_tool_calls(
            text,
            declared,
            finish_reason=finish_reason,
            tool_format=tool_format,
            reasoning_open=reasoning_open,
            repair=cast("RepairLevel", repair),
        )
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    out = outcome.to_dict()
    if note is not None:
        out["input_note"] = note
    typer.echo(json.dumps(out, ensure_ascii=False, indent=2, default=str))


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``tooldispatch parse`` to the command line."""
    app.command("parse")(parse_command)
