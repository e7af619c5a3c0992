"""``tooldispatch trace ...``, ``tooldispatch approvals ...`` and ``tooldispatch bench dispatch``.

Thin: each command opens the store, calls the library and prints a ``rich`` table or JSON. The listing
commands open it read-only: they never create, migrate or switch a database to WAL, and refuse one that is
not a tooldispatch store.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from tooldispatch.errors import ConfigError
from tooldispatch.store import ENV_VAR

if TYPE_CHECKING:
    from rich.console import Console

    from tooldispatch.dispatch import DispatchResult
    from tooldispatch.dispatch.trace import DispatchTrace
    from tooldispatch.store import StateStore

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        envvar=ENV_VAR,
        help="The dispatcher's store: a SQLite file, or a postgresql:// URL (also read from TOOLDISPATCH_STORE). "
        "Default: the store runs are kept in (tooldispatch config get store).",
    ),
]
OtelOpt = Annotated[bool, typer.Option("--otel", help="Print OpenTelemetry GenAI execute_tool spans as JSON.")]


def _console() -> Console:
    from rich.console import Console

    return Console(width=160, soft_wrap=True)


def _open(target: str | None, *, readonly: bool) -> StateStore:
    from tooldispatch.store import open_store

    target = _store_or_home(target)
    try:
        return open_store(_existing(target), readonly=readonly)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


def _existing(target: str) -> str:
    """A store file must already exist: a typo must not make an empty one."""
    path = Path(target)
    if "://" not in target and target != ":memory:" and not path.is_file():
        typer.echo(
            f"error: no state file at {path}; pass --store with the file given to Dispatcher(store=...)", err=True
        )
        raise typer.Exit(2)
    return target


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _find_trace(store: StateStore, trace_id: str) -> DispatchTrace:
    from tooldispatch.dispatch.trace import DispatchTrace

    if not trace_id or any(c not in "0123456789abcdef" for c in trace_id):
        typer.echo(f"{trace_id!r} is not a trace id; ids are hexadecimal, as 'tooldispatch trace list' shows", err=True)
        raise typer.Exit(1)
    rows = store.fetchall("SELECT data FROM traces WHERE id LIKE ? ORDER BY id LIMIT 2", [trace_id + "%"])
    if not rows:
        typer.echo(f"no trace {trace_id!r}; run 'tooldispatch trace list' to see the ids", err=True)
        raise typer.Exit(1)
    if len(rows) > 1:
        typer.echo(f"{trace_id!r} matches more than one trace; give more characters of the id", err=True)
        raise typer.Exit(1)
    return DispatchTrace.from_dict(json.loads(rows[0][0]))


def trace_list(
    store: StoreOpt = None,
    session: Annotated[str | None, typer.Option(help="Only this session.")] = None,
    tool: Annotated[str | None, typer.Option(help="Only this tool.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="The most recent N traces.")] = 50,
    otel: OtelOpt = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the traces as JSON.")] = False,
) -> None:
    """List the most recent dispatch traces, oldest first.

    Read-only calls' traces are written in batches: a running dispatcher's latest ones appear here after
    its next batch write, its ``flush()`` or its ``close()``.
    """
    from rich.table import Table

    from tooldispatch.dispatch.state import State

    st = _open(store, readonly=True)
    try:
        traces = State(st).traces(session_id=session, tool=tool, limit=limit)
    finally:
        st.close()
    if otel:
        typer.echo(json.dumps([t.to_otel() for t in traces], indent=2))
        return
    if as_json:
        typer.echo(json.dumps([t.to_dict() for t in traces], indent=2, ensure_ascii=False))
        return
    table = Table(title=f"traces in {st.target} ({len(traces)})")
    for col in ("id", "started (UTC)", "session", "tool", "status", "reason", "attempts", "tool ms"):
        table.add_column(col, justify="right" if col in ("attempts", "tool ms") else "left")
    for t in traces:
        tool_s = t.latencies.get("tool")
        table.add_row(
            t.id[:12],
            _iso(t.started_at),
            t.session_id,
            t.tool,
            t.status,
            t.reason or "",
            str(t.attempts),
            f"{tool_s * 1000:.2f}" if tool_s is not None else "",
        )
    _console().print(table)


def trace_show(
    trace_id: Annotated[str, typer.Argument(help="A trace id, or its first characters.")],
    store: StoreOpt = None,
    otel: OtelOpt = False,
    result: Annotated[bool, typer.Option("--result", help="Also print the full, unbounded result.")] = False,
) -> None:
    """Show one trace in full, as JSON."""
    from tooldispatch.dispatch.state import State

    st = _open(store, readonly=True)
    try:
        trace = _find_trace(st, trace_id)
        full = State(st).full_result(trace.id) if result else None
    finally:
        st.close()
    out: dict[str, Any] = trace.to_otel() if otel else trace.to_dict()
    if result:
        out = {"trace": out, "result": full}
    typer.echo(json.dumps(out, indent=2, ensure_ascii=False))


def trace_stats(
    store: StoreOpt = None,
    tool: Annotated[str | None, typer.Option(help="Only this tool.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the metrics as JSON.")] = False,
) -> None:
    """Per-tool rates over the stored traces, with the rates over their action thresholds flagged."""
    from rich.table import Table

    from tooldispatch.dispatch.metrics import COUNTERS, THRESHOLDS, report
    from tooldispatch.dispatch.state import State

    st = _open(store, readonly=True)
    try:
        metrics = report([t.to_dict() for t in State(st).traces(tool=tool)])
    finally:
        st.close()
    if as_json:
        typer.echo(json.dumps({**metrics.to_dict(), "thresholds": THRESHOLDS, "flagged": metrics.flagged}, indent=2))
        return
    table = Table(title=f"dispatch metrics in {st.target}")
    table.add_column("tool")
    table.add_column("calls", justify="right")
    for name in COUNTERS:
        table.add_column(f"{name.replace('_', ' ')}\n(> {THRESHOLDS[name]:.0%})", justify="right")
    for m in [*metrics, metrics.overall]:
        cells = []
        for name in COUNTERS:
            cell = f"{m.rates[name]:.1%}"
            cells.append(f"[bold red]{cell} ![/]" if name in m.flags else cell)
        table.add_row(m.tool, str(m.calls), *cells)
    console = _console()
    console.print(table)
    for line in metrics.flagged:
        console.print(f"[red]flag[/] {line}", highlight=False)
    if not metrics.flagged:
        console.print("no rate over its threshold")


def approvals_list(
    store: StoreOpt = None,
    every: Annotated[bool, typer.Option("--all", help="Also show decided approvals.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """List suspended calls waiting for a person's decision."""
    from rich.table import Table

    from tooldispatch.dispatch.state import State
    from tooldispatch.mcp.pins import Pins

    st = _open(store, readonly=True)
    try:
        pending = State(st).approvals(None if every else "pending")
        changed = Pins(st).pending()
    finally:
        st.close()
    if as_json:
        rows = [asdict(p) for p in pending] + [asdict(p) for p in changed]
        typer.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    table = Table(title=f"approvals in {st.target} ({len(pending)})")
    for col in ("id", "created (UTC)", "session", "tool", "arguments", "state", "reason"):
        table.add_column(col)
    for p in pending:
        table.add_row(
            p.id,
            _iso(p.created_at),
            p.session_id,
            p.tool,
            json.dumps(p.args, ensure_ascii=False),
            p.state,
            p.reason or "",
        )
    _console().print(table)
    for pin in changed:
        typer.echo(
            f"{pin.id}: MCP server {pin.server!r} changed tool {pin.tool!r} (definition sha256 {pin.sha256[:12]}); "
            f"blocked until approved: {json.dumps(pin.definition, ensure_ascii=False)}"
        )


def _decide_pin(approval_id: str, store: str, approve: bool) -> None:
    """Approve or deny a changed MCP tool definition (``pin_...`` ids)."""
    import time

    from tooldispatch.mcp.pins import Pins

    st = _open(store, readonly=False)
    try:
        pins = Pins(st)
        pin = pins.decide(approval_id, "approved" if approve else "denied", time.time())
        known = pins.get(approval_id)
    finally:
        st.close()
    if pin is None:
        _fail(f"no pending MCP tool change {approval_id!r}" + (f" (it is {known.state})" if known else ""))
    typer.echo(f"{pin.id}: MCP server {pin.server!r} tool {pin.tool!r} version {pin.sha256[:12]} is {pin.state}")


def _store_or_home(store: str | None) -> str:
    from tooldispatch.home import default_store

    return store or default_store()


def _run_sources(st: StateStore, approval_id: str) -> tuple[list[str], list[str], str] | None:
    """The tools, MCP configs and demo world of the run that suspended ``approval_id`` (``None``: no such run)."""
    from tooldispatch.dispatch.state import State
    from tooldispatch.runlog import latest_of_session, sources_of

    pending = State(st).approval(approval_id)
    if pending is None:
        _fail(f"no approval {approval_id!r} in {st.target}; 'tooldispatch approvals list' shows the pending ones")
    record = latest_of_session(st, pending.session_id)
    if record is None:
        return None
    tools, mcp = sources_of(record)
    return tools, mcp, record.world


def approvals_approve(
    approval_id: Annotated[str, typer.Argument(help="The approval id from 'approvals list'.")],
    tools: Annotated[
        list[str] | None,
        typer.Option(
            help="The tools the call was suspended on, when no kept run names them: 'demo', 'file.py[:attr]' or "
            "'package.module:attr' (a Registry or a function returning one). Repeatable."
        ),
    ] = None,
    store: StoreOpt = None,
    args: Annotated[str | None, typer.Option("--args", help="Edited arguments as a JSON object.")] = None,
    mcp: Annotated[
        list[Path] | None,
        typer.Option("--mcp", metavar="FILE", help="The mcpServers file(s) whose tool was suspended."),
    ] = None,
) -> None:
    """Approve a suspended call and run it now, on the tools and world of the run that suspended it.

    A call suspended by `tooldispatch run` or `chat` needs no flag: the run log names its tools and its
    demo world. A call suspended by your own Dispatcher needs --tools/--mcp. Prints the result.
    """
    from tooldispatch.dispatch import Dispatcher
    from tooldispatch.sources import load_sources

    edited: dict[str, Any] | None = None
    if args is not None:
        try:
            parsed = json.loads(args)
        except json.JSONDecodeError as exc:
            _fail(f"--args is not valid JSON ({exc.msg} at character {exc.pos}); pass one JSON object")
        if not isinstance(parsed, dict):
            _fail('--args must be a JSON object, e.g. \'{"order_id": "o-101"}\'')
        edited = parsed
    target = _store_or_home(store)
    if approval_id.startswith("pin_"):
        _decide_pin(approval_id, target, approve=True)
        return
    st = _open(target, readonly=False)
    sources = None
    try:
        world = ":memory:"
        if tools or mcp:
            targets, configs = list(tools or []), [str(m) for m in mcp or []]
        else:
            found = _run_sources(st, approval_id)
            if found is None:
                _fail(
                    f"approval {approval_id!r} was not suspended by a kept run of `tooldispatch run` or `chat`; "
                    "pass the tools it was suspended on: --tools 'package.module:attr' or --mcp FILE"
                )
            targets, configs, world = found
            world = world or ":memory:"
        sources = load_sources(targets, configs, store=st, demo_world=world)
        dispatcher = Dispatcher(sources.registry, store=st, tool_loop=sources.tool_loop)
        result = dispatcher.approve(approval_id, edited)
    except ConfigError as exc:
        if sources is not None:
            sources.close()
        st.close()
        _fail(str(exc))
    sources.close()
    dispatcher.close()
    _print_result(result)


def approvals_deny(
    approval_id: Annotated[str, typer.Argument(help="The approval id from 'approvals list'.")],
    reason: Annotated[str, typer.Option(help="Why; the model is told.")],
    store: StoreOpt = None,
) -> None:
    """Deny a suspended call: it never runs, and the model is told why."""
    from tooldispatch.dispatch import Dispatcher, Registry

    target = _store_or_home(store)
    if approval_id.startswith("pin_"):
        _decide_pin(approval_id, target, approve=False)
        return
    st = _open(target, readonly=False)
    dispatcher = Dispatcher(Registry(), store=st)
    try:
        result = dispatcher.deny(approval_id, reason)
    except ConfigError as exc:
        dispatcher.close()
        _fail(str(exc))
    dispatcher.close()
    _print_result(result)


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


def _print_result(result: DispatchResult) -> None:
    out = {"status": result.status, "reason": result.reason, "trace_id": result.trace.id, "content": result.content}
    typer.echo(json.dumps(out, indent=2, ensure_ascii=False))
    if result.status != "ok":
        raise typer.Exit(1)


def bench_dispatch(
    iterations: Annotated[int, typer.Option(min=100, help="Timed calls of the read-only variant.")] = 3000,
    side_effect_iterations: Annotated[int, typer.Option(min=100, help="Timed side-effecting calls.")] = 1000,
    sessions: Annotated[int, typer.Option(min=1, help="Concurrent sessions for the throughput run.")] = 8,
    calls_per_session: Annotated[int, typer.Option(min=10, help="Calls per session in the throughput run.")] = 200,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help="Compare the durable side-effecting call and calls/s with 1, 4 and 16 worker processes on this "
            "store (a postgresql:// URL) with a SQLite file, side by side.",
        ),
    ] = None,
    mcp: Annotated[
        bool, typer.Option("--mcp/--no-mcp", help="Also measure an MCP call (mcp-server-time over stdio).")
    ] = True,
) -> None:
    """Dispatch overhead against a bare function call, and calls/s with concurrent sessions."""
    if store is not None:
        from tooldispatch.cli.store_bench import print_store_bench

        print_store_bench(store, as_json=as_json)
        return
    from tooldispatch.bench.dispatch import run_dispatch_bench

    result = run_dispatch_bench(
        iterations=iterations,
        side_effect_iterations=side_effect_iterations,
        sessions=sessions,
        calls_per_session=calls_per_session,
    )
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
        return
    from rich.table import Table

    console = _console()
    table = Table(title="dispatch overhead per call (µs), measured side by side")
    for col in (
        "variant",
        "n",
        "bare median",
        "dispatched median",
        "dispatched p95",
        "overhead median",
        "overhead p95",
        "target",
        "verdict",
    ):
        table.add_column(col, justify="left" if col == "variant" else "right")
    for label, o in (
        ("read-only no-op", result.read_only),
        ("side-effecting, durable idempotency", result.side_effecting),
    ):
        table.add_row(
            label,
            str(o.dispatched.n),
            f"{o.bare.median_us:.2f}",
            f"{o.dispatched.median_us:.1f}",
            f"{o.dispatched.p95_us:.1f}",
            f"{o.median_overhead_us:.1f}",
            f"{o.p95_overhead_us:.1f}",
            f"≤ {o.target_us:g}",
            "[green]meets[/]" if o.meets_target else "[red]misses[/]",
        )
    console.print(table)
    hop = result.thread_hop
    console.print(
        "floor for sync tools (a no-op run in a worker thread, waited for as dispatch() waits): "
        f"median {hop.median_us:.1f} µs, p95 {hop.p95_us:.1f} µs",
        highlight=False,
    )
    tp = result.throughput
    t2 = Table(title=f"throughput with {tp.sessions} concurrent sessions ({tp.calls} calls)")
    for col in ("variant", "calls/s"):
        t2.add_column(col, justify="left" if col == "variant" else "right")
    t2.add_row("bare record()", f"{tp.bare_calls_per_s:,.0f}")
    t2.add_row("dispatch record (side-effecting, durable idempotency)", f"{tp.dispatched_calls_per_s:,.0f}")
    t2.add_row("  the same calls from one session alone", f"{tp.one_session_calls_per_s:,.0f}")
    console.print(t2)
    console.print(f"store: {result.store}; python {result.python}", highlight=False)
    if mcp:
        _bench_mcp_row(console)


def _bench_mcp_row(console: Console) -> None:
    """The MCP row: dispatch of an MCP call against the SDK's direct call, side by side."""
    from rich.table import Table

    from tooldispatch.bench.dispatch import run_mcp_overhead

    try:
        result = run_mcp_overhead()
    except ConfigError as exc:
        console.print(f"MCP row skipped: {exc}", highlight=False)
        return
    table = Table(
        title="MCP: dispatch over a direct SDK call made from the same place (µs), mcp-server-time over stdio, "
        "side by side"
    )
    for col in (
        "variant",
        "n",
        "SDK median",
        "dispatched median",
        "overhead median",
        "outside call_tool: SDK / dispatched median",
        "dispatch layer median",
        "dispatch layer p95",
        "target",
    ):
        table.add_column(col, justify="left" if col == "variant" else "right")
    for label, o in (
        ("adispatch on the connection's loop (gateway)", result.in_loop),
        ("dispatch() from another thread (agent, scripts)", result.sync),
    ):
        table.add_row(
            label,
            str(o.wall.dispatched.n),
            f"{o.wall.bare.median_us:.1f}",
            f"{o.wall.dispatched.median_us:.1f}",
            f"{o.wall.median_overhead_us:.1f}",
            f"{o.outside.bare.median_us:.1f} / {o.outside.dispatched.median_us:.1f}",
            f"{o.outside.median_overhead_us:.1f}",
            f"{o.outside.p95_overhead_us:.1f}",
            f"≤ {o.outside.target_us:g} {'[green]meets[/]' if o.meets_target else '[red]misses[/]'}",
        )
    console.print(table)
    console.print(
        "overhead: dispatched median minus SDK median, whole calls (the server's time and noise included). "
        "dispatch layer: the same with each call's own call_tool time taken out first (what is left is the "
        "caller's side); the target is judged on it.",
        highlight=False,
    )


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add the dispatch commands to the ``tooldispatch`` app and its ``bench`` group."""
    trace_app = typer.Typer(help="Inspect the dispatch traces kept in a state file.", no_args_is_help=True)
    trace_app.command("list")(trace_list)
    trace_app.command("show")(trace_show)
    trace_app.command("stats")(trace_stats)
    app.add_typer(trace_app, name="trace")
    approvals_app = typer.Typer(help="Decide on suspended calls that need a person's approval.", no_args_is_help=True)
    approvals_app.command("list")(approvals_list)
    approvals_app.command("approve")(approvals_approve)
    approvals_app.command("deny")(approvals_deny)
    app.add_typer(approvals_app, name="approvals")
    bench.command("dispatch")(bench_dispatch)
