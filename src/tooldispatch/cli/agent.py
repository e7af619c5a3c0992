"""``tooldispatch run``, ``chat`` and ``demo``: the agent loop from the command line."""

from __future__ import annotations

import json
from pathlib import Path
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
    TranscriptOpt,
)
from tooldispatch.errors import TooldispatchError

if TYPE_CHECKING:
    from rich.console import Console


def _out(*, stderr: bool = False) -> Console:
    from rich.console import Console

    return Console(highlight=False, stderr=stderr)


def _ending(record: Any) -> str:
    """The last line of a run: how it ended, its id, and what to run next."""
    hint = {
        0: "",
        3: "; a budget ended it (raise --max-turns, --max-tokens or --n-ctx)",
        4: "; the backend failed",
        5: "; a call waits for approval: tooldispatch approvals list",
        6: f"; no progress ({(record.transcript.get('stuck') or {}).get('kind', '?')}; tooldispatch logs {record.id} "
        "shows the evidence; --stuck-repeats/--stuck-idle-turns change the limits)",
    }.get(record.exit_code, "")
    if record.transcript.get("answered_by") == "repeat_guard":
        hint += " (answered by the repeat guard, with calls disabled)"
    return (
        f"run {record.id} ({record.session_id}) ended: {record.end_reason}{hint}. "
        f"Continue it with: tooldispatch chat -c"
    )


DEFAULT_MODEL = "smollm2-135m-instruct@Q4_1"
DEMO_MODEL = "qwen2.5-coder-0.5b-instruct@Q4_K_M"


def _fail(exc: BaseException) -> typer.Exit:
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(code=2)


def _demo_world(store: str | None) -> tuple[Any, Any]:
    from tooldispatch.dispatch import Dispatcher
    from tooldispatch.tools.demo import DemoWorld, build_registry

    world = DemoWorld.seed()
    dispatcher = Dispatcher(build_registry(world), store=store or ":memory:")
    return world, dispatcher


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``run``, ``chat`` and ``demo`` to the command line."""

    @app.command(epilog=HELP)
    def run(
        task: Annotated[str, typer.Argument(help="What the agent should do, in plain words.")],
        model: ModelOpt = None,
        profile: ProfileOpt = None,
        base_url: Annotated[
            str | None, typer.Option(help="OpenAI-compatible server URL, overriding the profile.")
        ] = None,
        parse: Annotated[
            str | None,
            typer.Option(metavar="server|client", help="server (use the server's tool_calls) or client."),
        ] = None,
        tools: ToolsOpt = None,
        mcp: McpOpt = None,
        mcp_logs: McpLogsOpt = None,
        constrained: ConstrainedOpt = None,
        tool_choice: Annotated[
            str | None,
            typer.Option(
                metavar="auto|required|NAME",
                help="auto (call or answer), required (every turn is a call) or a tool name.",
            ),
        ] = None,
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
        transcript_file: TranscriptOpt = None,
    ) -> None:
        """Run one task with the agent loop, show the turns live, and keep the run (tooldispatch logs)."""
        from tooldispatch.cli.session import Session, build_backend, dumps, resolve, transcript

        console = _out(stderr=as_json)
        try:
            settings = resolve(
                model=model,
                profile=profile,
                base_url=base_url,
                parse=parse,
                tools=tools,
                mcp=mcp,
                mcp_logs=mcp_logs,
                constrained=constrained,
                tool_choice=tool_choice,
                n_ctx=n_ctx,
                temperature=temperature,
                seed=seed,
                max_tokens=max_tokens,
                max_turns=max_turns,
                threads=threads,
                prefix_cache_mb=prefix_cache_mb,
                answer_tool=answer_tool,
                repeat_guard=repeat_guard,
                stuck_repeats=stuck_repeats,
                stuck_idle_turns=stuck_idle_turns,
                store=store,
            )
            with console.status("loading the model…"):
                backend = build_backend(settings)
            session = Session(settings, console=console, backend=backend, command="run")
        except TooldispatchError as exc:
            raise _fail(exc) from exc
        try:
            result, record = session.run(task)
        except KeyboardInterrupt:
            raise typer.Exit(130) from None
        finally:
            session.close()
        data = transcript(result, record)
        if transcript_file is not None:
            transcript_file.write_text(dumps(data), encoding="utf-8")
            console.print(f"transcript written to {transcript_file}")
        if as_json:
            typer.echo(dumps(data))
        else:
            console.print(_ending(record), highlight=False)
        raise typer.Exit(record.exit_code)

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
        repeat_guard: Annotated[
            bool,
            typer.Option(
                help="Answer from the results already in the conversation when a turn only repeats answered calls "
                "(the turn generated once more with calls disabled, marked as the repeat guard's answer)."
            ),
        ] = True,
        stuck_repeats: Annotated[
            int, typer.Option(min=0, help="End a run as stuck after N turns repeating the same thing (0: never).")
        ] = 3,
        stuck_idle_turns: Annotated[
            int, typer.Option(min=0, help="End a run as stuck after N turns without a new successful call (0: never).")
        ] = 4,
        live: Annotated[
            bool | None, typer.Option(help="Show every turn as it happens (default: on for one seed, off for more).")
        ] = None,
        transcripts: Annotated[
            Path | None, typer.Option(help="Write each run's transcript here as seed<N>-<mode>.json.")
        ] = None,
        prefix_cache_mb: PrefixCacheOpt = None,
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
        from tooldispatch.backends.prefix_cache import DEFAULT_PREFIX_CACHE_MB
        from tooldispatch.cli.session import prefix_cache_setting
        from tooldispatch.models import pull
        from tooldispatch.tools.demo import DemoOutcome, demo_tasks, run_demo_task

        console = _out()
        tasks = {t.id: t for t in demo_tasks()}
        if task not in tasks:
            raise _fail(ValueError(f"unknown demo task {task!r}; choose one of {', '.join(tasks)}"))
        chosen = tasks[task]
        wanted = [m.strip() for m in modes.split(",") if m.strip()]
        if not wanted or any(m not in ("prompt", "constrained") for m in wanted):
            raise _fail(ValueError(f"--modes takes prompt and/or constrained, comma-separated; got {modes!r}"))
        try:
            path = pull(model, console=console)
            mb = prefix_cache_setting(prefix_cache_mb)
            backend = LlamaCppBackend(
                str(path),
                manifest=model.partition("@")[0],
                prefix_cache_mb=DEFAULT_PREFIX_CACHE_MB if mb is None else mb,
            )
        except TooldispatchError as exc:
            raise _fail(exc) from exc
        show = live if live is not None else seeds == 1
        seed_list = list(range(seed, seed + seeds))
        console.print(
            f"[bold]model[/bold] {model} ({path}), in-process llama.cpp, n_ctx {backend.n_ctx}, "
            f"{backend.prefix_cache.describe()}"
        )
        console.print(f"[bold]task[/bold] {chosen.prompt}")
        console.print(
            f"[bold]dispatcher[/bold] auto_refresh {'on' if auto_refresh else 'off'}, drop_extra_arguments "
            f"{'on' if drop_extra_arguments else 'off'}; agent: repeat_guard {'on' if repeat_guard else 'off'}, "
            f"stuck after {stuck_repeats or 'no'} repeats / {stuck_idle_turns or 'no'} idle turns; "
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
                    repeat_guard=repeat_guard,
                    stuck_repeats=stuck_repeats or None,
                    stuck_idle_turns=stuck_idle_turns or None,
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
