"""``tooldispatch bench backend``: decode speed against bare llama-cpp-python and llama-server, loop overhead."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from tooldispatch.errors import BackendUnavailable, ConfigError

if TYPE_CHECKING:
    from rich.table import Table

    from tooldispatch.bench.backend_report import BackendReport, DecodeRow


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def tables(report: BackendReport) -> list[Table]:
    """Return the report as ``rich`` tables, in the order they are printed."""
    from rich.table import Table

    s = report.settings
    ours = report.row("llamacpp")
    server = report.row("llama-server")
    decode = Table(
        title=(
            f"Decode on {s.model}: {s.prompt_tokens}-token prompt, {s.max_tokens} tokens, {s.threads} thread(s), "
            f"seed {s.seed}, {s.rounds} ABBA rounds (medians)"
        )
    )
    for column in ("engine", "tok/s", "tokens", "CPU ms/token", "llamacpp vs row", "row vs llama-server"):
        decode.add_column(column, justify="left" if column == "engine" else "right")
    for row in report.decode:
        if not row.measured:
            decode.add_row(row.label, row.note or "not measured", "-", "-", "-", "-")
            continue
        vs_row = "-" if row is ours or ours is None else _num(_paired(ours, row), ".3f")
        vs_server = "-" if row is server or server is None or not server.measured else _num(_paired(row, server), ".3f")
        decode.add_row(
            row.label,
            _num(row.tokens_per_s, ".1f"),
            _num(row.tokens, "d"),
            _num(row.cpu_ms_per_token, ".2f"),
            vs_row,
            vs_server,
        )

    mode = "constrained" if s.agent_constrained else "unconstrained"
    loop = Table(title=f"Agent loop overhead (wall time minus model and tool time; llamacpp {mode})")
    for column in ("backend", "task", "runs", "turns", "ends", "wall s", "overhead ms", "share of wall", "ms per turn"):
        loop.add_column(column, justify="left" if column in ("backend", "task", "ends") else "right")
    for o in report.overhead:
        loop.add_row(
            o.backend,
            o.task,
            str(o.runs),
            str(o.turns),
            ", ".join(sorted(set(o.ends))),
            f"{o.wall_s:.2f}",
            f"{o.overhead_s * 1000:.1f}",
            _num(None if o.share is None else 100 * o.share, ".2f") + "%",
            _num(o.ms_per_turn, ".2f"),
        )

    goals = Table(title="Targets")
    for column in ("target", "measured", "goal", "status", "detail"):
        goals.add_column(column)
    for t in report.targets:
        shown = "-" if t.value is None else (f"{100 * t.value:.2f}%" if "%" in t.target else f"{t.value:.3f}")
        style = {"MET": "green", "MISSED": "bold red"}.get(t.status, "yellow")
        goals.add_row(t.name, shown, t.target, f"[{style}]{t.status}[/]", t.detail)
    return [decode, loop, goals]


def _paired(a: DecodeRow, b: DecodeRow) -> float | None:
    from tooldispatch.bench.backend_report import paired_ratio

    return paired_ratio(a.rates(), b.rates())


ModelOpt = Annotated[str, typer.Option("--model", help="name@QUANT of a pulled model.")]
ThreadsOpt = Annotated[
    int,
    typer.Option(
        "--threads",
        min=1,
        help="CPU threads for every engine. 1 by default: on a busy machine llama.cpp's threads wait on each other.",
    ),
]
CtxOpt = Annotated[int, typer.Option("--n-ctx", min=256, help="Context length for every engine.")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Sampling seed for every engine.")]
TokensOpt = Annotated[int, typer.Option("--max-tokens", min=8, help="Tokens per decode run and per agent turn.")]
RoundsOpt = Annotated[int, typer.Option("--rounds", min=1, help="Decode rounds; each engine runs once per round.")]
AgentRunsOpt = Annotated[int, typer.Option("--agent-runs", min=1, help="Agent runs on the llamacpp backend.")]
ScriptedRunsOpt = Annotated[int, typer.Option("--scripted-runs", min=1, help="Agent runs on the scripted backend.")]
TaskOpt = Annotated[str, typer.Option("--task", help="Demo task id for the agent-loop rows.")]
ServerOpt = Annotated[
    str | None,
    typer.Option(
        "--llama-server",
        help="llama-server binary (default: on PATH, else ~/.cache/tooldispatch/llama-server/bin/llama-server).",
    ),
]
ConstrainedOpt = Annotated[
    bool,
    typer.Option(
        "--constrained/--unconstrained",
        help="Agent runs on llamacpp decode under the tool-call grammar (many turns, but slow to sample).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the report as JSON instead of tables.")]


def bench_backend(
    model: ModelOpt = "smollm2-135m-instruct@Q4_1",
    threads: ThreadsOpt = 1,
    n_ctx: CtxOpt = 2048,
    seed: SeedOpt = 0,
    max_tokens: TokensOpt = 128,
    rounds: RoundsOpt = 6,
    agent_runs: AgentRunsOpt = 2,
    scripted_runs: ScriptedRunsOpt = 20,
    task: TaskOpt = "assign-north",
    llama_server: ServerOpt = None,
    constrained: ConstrainedOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Decode tok/s of the llamacpp backend against bare llama-cpp-python and llama-server, and loop overhead."""
    from rich.console import Console

    from tooldispatch.bench.backend import find_llama_server, run

    console = Console(width=180, stderr=as_json)
    try:
        binary = find_llama_server(llama_server)
        report = run(
            model=model,
            threads=threads,
            n_ctx=n_ctx,
            seed=seed,
            max_tokens=max_tokens,
            rounds=rounds,
            agent_runs=agent_runs,
            scripted_runs=scripted_runs,
            task_id=task,
            llama_server=binary,
            agent_constrained=constrained,
            progress=lambda msg: console.print(f"[dim]{msg}[/]"),
        )
    except (ConfigError, BackendUnavailable) as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(json.dumps(report.to_json(), indent=2))
        return
    for table in tables(report):
        console.print(table)
    before, after = report.load_before, report.load_after
    console.print(
        f"load average {before[0]:.2f} at the start, {after[0]:.2f} at the end, on {report.cpus} CPU(s); "
        "a shared machine makes every figure noisy, the per-round ratios less so."
    )


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``bench backend`` to the ``bench`` group."""
    bench.command("backend")(bench_backend)
