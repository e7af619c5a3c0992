"""``tooldispatch chat``: a conversation with the agent that keeps its messages and its world across lines.

Each line is the next user message of one conversation (one session: one demo world, one set of tools);
every answer is kept in the run log, so ``chat -c`` continues the most recent run (of ``run`` or ``chat``)
and ``chat --run ID`` a given one. On a terminal the line is read with ``readline`` (editing, Up for
history, kept in the home's ``chat_history``); piped input is read line by line without a prompt.
"""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tooldispatch.cli.exits import HELP
from tooldispatch.cli.options import (
    AnswerToolOpt,
    ConstrainedOpt,
    JsonOpt,
    MaxTokensOpt,
    MaxTurnsOpt,
    McpLogsOpt,
    McpOpt,
    ModelOpt,
    NCtxOpt,
    PrefixCacheOpt,
    ProfileOpt,
    RepeatGuardOpt,
    SeedOpt,
    StoreOpt,
    StuckIdleOpt,
    StuckRepeatsOpt,
    TemperatureOpt,
    ThreadsOpt,
    ToolsOpt,
)
from tooldispatch.errors import TooldispatchError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from rich.console import Console

    from tooldispatch.runlog import RunRecord

PROMPT = "› "
"""The prompt marker shown before each line on a terminal."""

_EXIT_WORDS = ("exit", "quit", "/exit", "/quit")


def _lines(console: Console, interactive: bool) -> Iterator[str]:
    """The user's lines: ``input()`` with readline on a terminal (Ctrl-C clears the line), else stdin."""
    if not interactive:
        for line in sys.stdin:
            yield line.rstrip("\n")
        return
    while True:
        try:
            yield input(PROMPT)
        except KeyboardInterrupt:
            console.print()
            continue
        except EOFError:
            console.print()
            return


def _readline_history() -> Any:
    """Turn on line editing and the kept history; returns a function that saves it (or ``None``)."""
    try:
        import readline
    except ImportError:  # no readline on this platform: plain input() still works
        return None
    from tooldispatch.home import data_dir

    path = data_dir() / "chat_history"
    with contextlib.suppress(OSError):
        readline.read_history_file(path)
    readline.set_history_length(1000)

    def save() -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            readline.write_history_file(path)
        except OSError:
            pass

    return save


def _continued(store: str | None, run_id: str | None) -> RunRecord:
    """The run to continue: ``run_id``, else the most recent kept run."""
    from tooldispatch.cli.session import open_store_for_runs
    from tooldispatch.errors import ConfigError
    from tooldispatch.home import default_store
    from tooldispatch.runlog import get, recent

    st = open_store_for_runs(store or default_store())
    try:
        if run_id is not None:
            return get(st, run_id)
        last = recent(st, 1)
    finally:
        st.close()
    if not last:
        raise ConfigError("no run to continue in the store yet; start one with `tooldispatch run TASK` or `chat`")
    return last[0]


def chat(
    cont: Annotated[
        bool, typer.Option("--continue", "-c", help="Continue the most recent run (its conversation and world).")
    ] = False,
    run_id: Annotated[
        str | None, typer.Option("--run", metavar="ID", help="Continue this run (an id from tooldispatch logs).")
    ] = None,
    model: ModelOpt = None,
    profile: ProfileOpt = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL, overriding the profile.")] = None,
    parse: Annotated[
        str | None, typer.Option(metavar="server|client", help="server (use the server's tool_calls) or client.")
    ] = None,
    tools: ToolsOpt = None,
    mcp: McpOpt = None,
    mcp_logs: McpLogsOpt = None,
    constrained: ConstrainedOpt = None,
    n_ctx: NCtxOpt = None,
    temperature: TemperatureOpt = None,
    seed: SeedOpt = None,
    max_tokens: MaxTokensOpt = None,
    max_turns: MaxTurnsOpt = None,
    threads: ThreadsOpt = None,
    prefix_cache_mb: PrefixCacheOpt = None,
    answer_tool: AnswerToolOpt = None,
    repeat_guard: RepeatGuardOpt = None,
    stuck_repeats: StuckRepeatsOpt = None,
    stuck_idle_turns: StuckIdleOpt = None,
    store: StoreOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Talk to the agent: each line continues one conversation in one world. Ctrl-D (or 'exit') ends."""
    from rich.console import Console

    from tooldispatch.cli.session import Session, build_backend, resolve, transcript

    console = Console(highlight=False, stderr=as_json)
    given: dict[str, Any] = {
        "model": model,
        "profile": profile,
        "base_url": base_url,
        "parse": parse,
        "tools": tools,
        "mcp": mcp,
        "mcp_logs": mcp_logs,
        "constrained": constrained,
        "n_ctx": n_ctx,
        "temperature": temperature,
        "seed": seed,
        "max_tokens": max_tokens,
        "max_turns": max_turns,
        "threads": threads,
        "prefix_cache_mb": prefix_cache_mb,
        "answer_tool": answer_tool,
        "repeat_guard": repeat_guard,
        "stuck_repeats": stuck_repeats,
        "stuck_idle_turns": stuck_idle_turns,
        "store": store,
    }
    try:
        parent = _continued(store, run_id) if cont or run_id else None
        if parent is not None:
            from tooldispatch.runlog import sources_of

            recorded_tools, recorded_mcp = sources_of(parent)
            if tools is None and mcp is None:
                given["tools"], given["mcp"] = recorded_tools or None, recorded_mcp or None
            for key, value in {"model": parent.model, "profile": parent.profile, **parent.settings}.items():
                if key in given and given[key] is None and value is not None:
                    given[key] = value
        settings = resolve(**given)
        with console.status("loading the model…"):
            backend = build_backend(settings)
        session = Session(
            settings,
            console=console,
            backend=backend,
            command="chat",
            session_id=parent.session_id if parent else None,
            world=(parent.world or None) if parent else None,
            summary=False,
        )
    except TooldispatchError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    interactive = sys.stdin.isatty()
    save_history = _readline_history() if interactive else None
    conversation = parent.conversation() if parent else None
    last_id = parent.id if parent else None
    tools_line = f"{len(session.sources.registry)} tools"
    if parent is not None:
        console.print(f"[dim]continuing run {parent.id} ({parent.session_id}): {parent.task}[/dim]")
        if parent.final_answer:
            console.print(f"[dim]last answer: {parent.final_answer}[/dim]")
    console.print(
        f"[dim]tooldispatch chat: {session.settings.model or session.settings.profile}, {tools_line}; "
        "Ctrl-D or 'exit' ends[/dim]"
    )
    try:
        for line in _lines(console, interactive):
            text = line.strip()
            if not text:
                continue
            if text in _EXIT_WORDS:
                break
            try:
                result, record = session.run(text, history=conversation, parent_id=last_id)
            except KeyboardInterrupt:
                console.print("[yellow]interrupted[/yellow]; the conversation goes on from before this line")
                continue
            conversation, last_id = record.conversation(), record.id
            if as_json:
                typer.echo(_one_line(transcript(result, record)))  # one JSON object per line (JSONL)
            elif result.final_answer:
                console.print(f"[bold]{result.final_answer}[/bold]")
                if result.answered_by == "repeat_guard":
                    console.print("[dim](answered by the repeat guard, with calls disabled)[/dim]")
            pending = f", {record.pending} awaiting approval (tooldispatch approvals list)" if record.pending else ""
            console.print(
                f"[dim]run {record.id}: {record.end_reason}, {record.calls} call(s){pending}, "
                f"{record.wall_s:.1f} s[/dim]"
            )
    finally:
        if save_history is not None:
            save_history()
        session.close()


def _one_line(data: Any) -> str:
    import json

    return json.dumps(data, ensure_ascii=False, default=str)


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``chat``."""
    del bench
    app.command("chat", epilog=HELP)(chat)
