"""``tooldispatch parse``: run the parser on one raw model output and say what it found.

The default output is for people: one block per call (name, arguments, bucket, repairs), then each rejected
candidate with its reason; ``--json`` prints ``ParseOutcome.to_dict()`` for machines. The exit code says
what was found: 0 a call was accepted and nothing was rejected, 1 nothing call-like was found, 2 a candidate
was rejected (also the code of bad input, whose ``error:`` line on stderr tells the two apart).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

from tooldispatch.errors import ConfigError

if TYPE_CHECKING:
    from tooldispatch.types import Candidate, ParseOutcome, RepairLevel

NOTHING_FOUND = 1
REJECTED = 2


def _load_json_tools(path: Path) -> list[Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(
            f"tools file {str(path)!r} does not exist; pass --tools with a JSON file, demo, file.py[:attr] or "
            "package.module:attr"
        ) from exc
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


def _load_tools(spec: str) -> list[Any]:
    """Tools from a JSON file, or from a tool source (``demo``, ``file.py[:attr]``, ``package.module:attr``)."""
    path = Path(spec)
    if spec.endswith(".json") or (path.is_file() and path.suffix != ".py"):
        return _load_json_tools(path)
    if spec != "demo" and ":" not in spec and not spec.endswith(".py"):
        return _load_json_tools(path)  # says the file does not exist, with the forms --tools takes
    from tooldispatch.sources import load_sources
    from tooldispatch.store import open_store

    store = open_store(":memory:")
    try:
        with load_sources([spec], store=store) as sources:
            return list(sources.registry.specs())
    finally:
        store.close()


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


def _args(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _candidate_lines(cand: Candidate) -> list[str]:
    flags = f" ({', '.join(sorted(cand.flags))})" if cand.flags else ""
    lines = [f"  bucket {cand.bucket}, {cand.stage} stage, {cand.format} format{flags}"]
    for rep in cand.repairs:
        distance = f", distance {rep.distance}" if rep.distance else ""
        lines.append(f"  repaired {rep.kind} {rep.path or '(name)'}: {rep.before!r} → {rep.after!r}{distance}")
    return lines


def readable(outcome: ParseOutcome, note: str | None = None) -> str:
    """The outcome for people: each call, then each rejected candidate with its reason, then the content."""
    lines: list[str] = []
    accepted = [c for c in outcome.candidates if c.accepted]
    for i, call in enumerate(outcome.calls, 1):
        lines.append(f"call {i}: {call.name} {_args(call.arguments)}")
        cand = accepted[i - 1] if len(accepted) == len(outcome.calls) else None
        lines += _candidate_lines(cand) if cand is not None else [f"  bucket {call.bucket}"]
    for cand in outcome.rejected:
        shown = f" {_args(cand.arguments)}" if cand.arguments is not None else ""
        lines.append(f"rejected: {cand.name or '?'}{shown}")
        lines += _candidate_lines(cand)
        lines.append(f"  reason: {cand.error}")
        raw = cand.raw if len(cand.raw) <= 200 else cand.raw[:199] + "…"
        lines.append(f"  as written: {raw}")
    if not outcome.candidates:
        lines.append("no tool call found")
    if outcome.content.strip():
        lines.append(f"content: {outcome.content.strip()}")
    if outcome.reasoning:
        lines.append(f"reasoning: {len(outcome.reasoning)} characters")
    if note:
        lines.append(f"note: {note}")
    return "\n".join(lines)


def exit_code(outcome: ParseOutcome) -> int:
    """0 a call was accepted and none rejected; 1 nothing call-like; 2 a candidate was rejected."""
    if outcome.rejected:
        return REJECTED
    return 0 if outcome.calls else NOTHING_FOUND


def parse_command(
    tools: Annotated[
        str,
        typer.Option(
            "--tools",
            help='The declared tools: a JSON file (the OpenAI tools list, {"tools": [...]}, or one tool), or a '
            "tool source: demo, path/to/file.py[:attr], package.module:attr.",
        ),
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
    repair: Annotated[
        str | None,
        typer.Option(
            "--repair",
            metavar="bounded|lossless|none",
            help="How far names and arguments of every tool are repaired (default: each tool's own level: bounded "
            "for read-only tools, lossless for the rest).",
        ),
    ] = None,
    policy: Annotated[
        Path | None,
        typer.Option(
            "--policy",
            help="A tool policy file (TOML) declaring which tools are read-only; tools from a JSON file are "
            "side-effecting without one (calls only in the tool-call format or alone).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the whole outcome as JSON.")] = False,
) -> None:
    """Parse a raw model output read from stdin: each call found, each rejected candidate and why.

    Exit code: 0 a call was accepted (none rejected), 1 no call found, 2 a candidate was rejected.
    Example: tooldispatch parse --tools tools.json < raw.txt
    """
    from tooldispatch.parsing.core import parse_tool_calls
    from tooldispatch.policy import load_policy
    from tooldispatch.toolspec import normalize_tools

    try:
        if repair not in (None, "bounded", "lossless", "none"):
            raise ConfigError(f"unknown --repair {repair!r}; use bounded, lossless or none")
        declared: Any = _load_tools(tools)
        if policy is not None:
            declared = load_policy(policy).declare(normalize_tools(declared).values())
        text, note = _read_stdin()
        outcome = parse_tool_calls(
            text,
            declared,
            finish_reason=finish_reason,
            tool_format=tool_format,
            reasoning_open=reasoning_open,
            repair=cast("RepairLevel | None", repair),
        )
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(code=2) from exc
    if as_json:
        out = outcome.to_dict()
        if note is not None:
            out["input_note"] = note
        typer.echo(json.dumps(out, ensure_ascii=False, indent=2, default=str))
    else:
        typer.echo(readable(outcome, note))
    raise typer.Exit(exit_code(outcome))


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``tooldispatch parse`` to the command line."""
    app.command("parse")(parse_command)
