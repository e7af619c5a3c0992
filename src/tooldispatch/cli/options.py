"""The command line's one vocabulary: each option means the same thing in every command that takes it.

- ``--json`` prints JSON to stdout (live output, if any, goes to stderr); ``--transcript FILE`` writes one.
- ``--constrained off|on|required``: no grammar; the grammar binds any call the model starts; every
  output is a call.
- ``--threads N``: llama.cpp CPU threads (``--n-threads`` is kept as a hidden alias where it existed).
- ``--tools``: ``demo``, ``path/to/file.py[:attr]`` or ``package.module:attr`` (a ``Registry`` or a function
  returning one), repeatable; ``--mcp FILE``: an ``mcpServers`` config. Both go through
  :func:`tooldispatch.sources.load_sources`.
- ``--prefix-cache-mb N``: the bound of the in-process model's prefix-state cache (``0``: off).
- ``--model``, ``--profile``, ``--n-ctx``, ``--temperature``, ``--seed``, ``--max-tokens``, ``--max-turns``:
  unset options fall back to ``tooldispatch config`` and then to the built-in defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

CONSTRAINED_MODES = ("off", "on", "required")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON to stdout instead of text.")]
TranscriptOpt = Annotated[
    Path | None, typer.Option("--transcript", metavar="FILE", help="Also write the run's full record here (JSON).")
]


def check_constrained(value: str | None) -> str | None:
    """Accept ``off``, ``on`` or ``required`` (``None`` stays unset)."""
    if value is not None and value not in CONSTRAINED_MODES:
        raise typer.BadParameter(f"{value!r}: use off, on or required")
    return value


ConstrainedOpt = Annotated[
    str | None,
    typer.Option(
        "--constrained",
        metavar="off|on|required",
        callback=check_constrained,
        help="Grammar-constrained decoding (llamacpp): off; on (a call the model starts follows the grammar); "
        "required (every turn is a call). Default: config, else off.",
    ),
]
ThreadsOpt = Annotated[
    int | None, typer.Option("--threads", "--n-threads", min=0, help="llama.cpp CPU threads (0: its default).")
]
ToolsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--tools",
        help="Tools: 'demo' (the logistics world), 'path/to/file.py[:attr]' or 'package.module:attr' (a Registry "
        "or a function returning one). Repeat to combine; default 'demo' unless --mcp is given.",
    ),
]
McpOpt = Annotated[
    list[Path] | None,
    typer.Option("--mcp", metavar="FILE", help="An mcpServers JSON file (stdio 'command' or HTTP 'url'). Repeatable."),
]
McpLogsOpt = Annotated[
    Path | None, typer.Option("--mcp-logs", metavar="DIR", help="Folder for MCP servers' stderr logs.")
]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", "-m", help="NAME@QUANT, an alias (models alias), or a served model id. Default: config."),
]
ProfileOpt = Annotated[
    str | None,
    typer.Option(
        "--profile", "-p", help="Deployment profile (tooldispatch profiles). Default: config, else cpu-llamacpp."
    ),
]
NCtxOpt = Annotated[
    int | None, typer.Option("--n-ctx", min=0, help="Context length in tokens (0: the model's own, capped at 16,384).")
]
TemperatureOpt = Annotated[
    float | None, typer.Option("--temperature", min=0.0, help="Sampling temperature (0: greedy). Default 0.")
]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="Sampling seed. Default 0.")]
MaxTokensOpt = Annotated[
    int | None, typer.Option("--max-tokens", min=1, help="Completion tokens per turn. Default 384.")
]
PrefixCacheOpt = Annotated[
    int | None,
    typer.Option(
        "--prefix-cache-mb",
        min=0,
        metavar="MB",
        help="Megabytes of saved llama.cpp context states kept for the in-process model, so a conversation "
        "interleaved with other requests does not evaluate its prompt again (0: off). Default: config, else 1024.",
    ),
]
MaxTurnsOpt = Annotated[int | None, typer.Option("--max-turns", min=1, help="Model turns per task. Default 6.")]
StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        envvar="TOOLDISPATCH_STORE",
        help="Where runs, traces and approvals are kept: a SQLite file or a postgresql:// URL. Default: config, "
        "else the per-user home's state.db (tooldispatch config path).",
    ),
]
RepeatGuardOpt = Annotated[
    bool | None,
    typer.Option(
        "--repeat-guard/--no-repeat-guard",
        help="When a turn only repeats calls whose results the conversation already holds, run none of them and "
        "answer from those results: the turn is generated once more with calls disabled, marked as the repeat "
        "guard's answer. Default on.",
    ),
]
StuckRepeatsOpt = Annotated[
    int | None,
    typer.Option(
        "--stuck-repeats",
        min=0,
        metavar="N",
        help="End the run as stuck (exit 6) when N turns in a row repeat the same output, the same refused call or "
        "the same calls with the same results (0: never). Default 3.",
    ),
]
StuckIdleOpt = Annotated[
    int | None,
    typer.Option(
        "--stuck-idle-turns",
        min=0,
        metavar="N",
        help="End the run as stuck (exit 6) after N turns in a row without a new successful call (0: never). "
        "Default 4.",
    ),
]
AnswerToolOpt = Annotated[
    bool | None,
    typer.Option(
        "--answer-tool/--no-answer-tool",
        help="Offer the agent's final_answer tool beside yours: a call to it is the run's answer (a model that "
        "keeps calling tools after the result it needed often calls it instead). Default off.",
    ),
]
