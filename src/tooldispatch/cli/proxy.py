"""``tooldispatch proxy`` (serve), ``tooldispatch proxy stats`` and ``tooldispatch bench proxy``.

Thin: the upstream, the app and the counting come from ``tooldispatch.proxy``; this module reads the
options, checks the safety settings, and runs uvicorn.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Annotated

import typer

from tooldispatch.errors import ConfigError, TooldispatchError

proxy_app = typer.Typer(
    help="An OpenAI-compatible endpoint that parses, repairs and validates tool calls in front of any upstream.",
    invoke_without_command=True,
)

_STORE_HELP = "The SQLite state file every request is counted in (default: the per-user store, as `run` uses)."


def _store_target(store: Path | None) -> str:
    """``--store``, else the per-user store every other command uses (``tooldispatch config``)."""
    from tooldispatch.home import default_store

    return str(store) if store is not None else default_store()


def _access_log() -> None:
    """Print the proxy's access-log lines on stderr, one per request."""
    import logging

    access = logging.getLogger("tooldispatch.proxy.access")
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    access.addHandler(handler)
    access.setLevel(logging.INFO)
    access.propagate = False


def _fail(exc: Exception) -> typer.Exit:
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(2)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@proxy_app.callback()
def proxy(
    ctx: typer.Context,
    profile: Annotated[str | None, typer.Option("--profile", "-p", help="Upstream: a profile name.")] = None,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="Upstream: an OpenAI-compatible API root (ending in /v1).")
    ] = None,
    dialect: Annotated[
        str | None, typer.Option("--dialect", help="The --base-url server: vllm, llama-server or openrouter.")
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Upstream: NAME@QUANT run in process with llama.cpp.")
    ] = None,
    parse: Annotated[
        str | None,
        typer.Option(
            "--parse",
            help="server: the upstream extracts calls, the proxy repairs and validates them; client: tools go into "
            "the prompt and the raw text is parsed here. Default: the profile's (vllm, openrouter: server; "
            "llama-server: client).",
        ),
    ] = None,
    served_model: Annotated[
        str | None, typer.Option("--served-model", help="The upstream's model name (default: its /v1/models).")
    ] = None,
    upstream_key_env: Annotated[
        str | None, typer.Option("--upstream-key-env", help="Environment variable with the upstream's API key.")
    ] = None,
    quant: Annotated[
        str | None, typer.Option("--quant", help="Quantization label in the statistics (default: NAME@QUANT's).")
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout", help="Seconds the upstream may take for a whole answer, or between two events of a stream."
        ),
    ] = None,
    n_ctx: Annotated[
        int | None,
        typer.Option(
            "--n-ctx", min=16, help="Context window of an in-process model, in tokens (default: the model's)."
        ),
    ] = None,
    repeat_guard: Annotated[
        bool,
        typer.Option(
            "--repeat-guard/--no-repeat-guard",
            help="Answer a turn whose calls only repeat calls already answered since the user's last message "
            "without calls (generated again with tool_choice none, marked x-tooldispatch-repeat-guard). Tools "
            "whose identical calls may answer differently are declared polling = true in the --policy file.",
        ),
    ] = True,
    quiet: Annotated[bool, typer.Option("--quiet", help="No access-log line per request.")] = False,
    client_timeout: Annotated[
        float,
        typer.Option(
            "--client-timeout", min=0.1, help="Seconds a client may take to send its request headers, and its body."
        ),
    ] = 60.0,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8100,
    api_key_env: Annotated[
        str | None,
        typer.Option("--api-key-env", help="Environment variable holding the key every client must send."),
    ] = None,
    store: Annotated[Path | None, typer.Option("--store", help=_STORE_HELP)] = None,
    record: Annotated[
        bool, typer.Option("--record", help="Also keep request bodies, raw outputs and answers in the store.")
    ] = False,
    max_body_bytes: Annotated[int, typer.Option("--max-body-bytes", min=1024, help="Largest request body.")] = (
        8 * 1024 * 1024
    ),
    max_tools: Annotated[int, typer.Option("--max-tools", min=1, help="Most tools per request.")] = 128,
    policy: Annotated[
        Path | None,
        typer.Option(
            "--policy",
            help='A tool policy file (TOML: [tools."GLOB"] read_only, destructive, idempotent). A request\'s '
            "tools carry no metadata, so without a rule each is side-effecting: calls only in the tool-call "
            "format or alone, lossless repairs only. Declare read-only tools here to let their calls be "
            "recovered from running text (docs/proxy.md).",
        ),
    ] = None,
    no_key_on_network: Annotated[
        bool,
        typer.Option("--no-key-on-network", help="Allow listening on a non-loopback address without --api-key-env."),
    ] = False,
    prefix_cache_mb: Annotated[
        int | None,
        typer.Option(
            "--prefix-cache-mb",
            min=0,
            metavar="MB",
            help="In-process upstream: megabytes of saved llama.cpp context states, so a conversation interleaved "
            "with other requests does not evaluate its prompt again (0: off). Default: config, else the profile's, "
            "else 1024.",
        ),
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="uvicorn's log level.")] = "info",
    loop: Annotated[
        str, typer.Option("--loop", help="Event loop: auto (uvloop when installed), asyncio or uvloop.")
    ] = ("auto"),
) -> None:
    """Serve /v1/chat/completions, /v1/models and /health in front of an upstream.

    With no upstream option, the default model runs in process with llama.cpp. Point any OpenAI client at
    http://HOST:PORT/v1 (see docs/proxy.md).
    """
    if ctx.invoked_subcommand is not None:
        return
    import uvicorn

    from tooldispatch.backends.prefix_cache import MB
    from tooldispatch.cli.session import prefix_cache_setting
    from tooldispatch.policy import load_policy
    from tooldispatch.proxy import Limits, Proxy, Recorder, build_app, build_upstream
    from tooldispatch.proxy.server import with_head_timeout
    from tooldispatch.proxy.translate import ToolCache
    from tooldispatch.store import open_store

    if parse not in (None, "server", "client"):
        raise _fail(ConfigError(f"--parse {parse!r}: use server or client"))
    if loop not in ("auto", "asyncio", "uvloop"):
        raise _fail(ConfigError(f"--loop {loop!r}: use auto, asyncio or uvloop"))
    key: str | None = None
    if api_key_env:
        key = os.environ.get(api_key_env, "")
        if not key:
            raise _fail(ConfigError(f"--api-key-env {api_key_env}: that environment variable is unset or empty"))
    elif not _loopback(host) and not no_key_on_network:
        raise _fail(
            ConfigError(
                f"listening on {host} without a key lets anyone on the network use the upstream; "
                "pass --api-key-env VAR (or --no-key-on-network to accept that)"
            )
        )
    try:
        declared = load_policy(policy) if policy is not None else None
        upstream = build_upstream(
            profile=profile,
            base_url=base_url,
            dialect=dialect,
            model=model,
            parse=parse,  # type: ignore[arg-type]  # checked above
            served_model=served_model,
            upstream_key_env=upstream_key_env,
            quant=quant,
            timeout_s=timeout,
            n_ctx=n_ctx,
        )
        cache_mb = prefix_cache_setting(prefix_cache_mb)
        target = _store_target(store)
        if "://" not in target:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
        state = open_store(target)
    except TooldispatchError as exc:
        raise _fail(exc) from exc
    limits = Limits(max_body_bytes=max_body_bytes, max_tools=max_tools)
    proxy = Proxy(
        upstream,
        limits,
        api_key=key,
        recorder=Recorder(state),
        record=record,
        repeat_guard=repeat_guard,
        access_log=not quiet,
        client_timeout_s=client_timeout,
        tool_cache=ToolCache(policy=declared),
    )
    app = build_app(proxy)
    where = upstream.base_url or "in process"
    tools = declared.source if declared is not None else "no --policy, every tool side-effecting"
    prefix_cache = upstream.prefix_cache  # the in-process model's; a server keeps its own
    if prefix_cache is not None:
        if cache_mb is not None:
            prefix_cache.set_limit(cache_mb * MB)  # before the first request: the same as building it so
        where = f"{where}, {prefix_cache.describe()}"
    typer.echo(
        f"proxy for {upstream.model} ({upstream.engine}, {upstream.mode} parse, {where}) on http://{host}:{port}/v1; "
        f"counting into {target}; tools: {tools}"
    )
    if not quiet:
        _access_log()
    try:
        # No X-Forwarded-* rewriting (the proxy never reads the client's address) and no "server" header: each
        # costs uvicorn work on every request (``docs/benchmarks.md``, the proxy section).
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level=log_level,
            access_log=False,
            loop=loop,
            proxy_headers=False,
            server_header=False,
            http=with_head_timeout(client_timeout),
        )
    finally:
        state.close()


@proxy_app.command("stats")
def stats(
    store: Annotated[Path | None, typer.Option("--store", help=_STORE_HELP)] = None,
) -> None:
    """Print the parse-repair rates of the traffic counted so far, per model and quantization."""
    from rich.console import Console
    from rich.table import Table

    from tooldispatch.proxy.stats import BUCKETS, has_requests, rates
    from tooldispatch.store import open_store

    target = _store_target(store)
    if "://" not in target and not Path(target).is_file():
        raise _fail(ConfigError(f"no state file at {target}; pass --store with the file given to `tooldispatch proxy`"))
    try:
        st = open_store(target, readonly=True)
    except TooldispatchError as exc:
        raise _fail(exc) from exc
    try:
        if st.fetchone("SELECT 1 FROM schema_migrations WHERE name = 'proxy_0001_requests'") is None:
            raise _fail(ConfigError(f"{target} holds no proxy traffic; pass the --store given to `tooldispatch proxy`"))
        if not has_requests(st):
            typer.echo(f"no proxied request counted in {target} yet")
            return
        rows = rates(st)
    finally:
        st.close()
    table = Table(title=f"parse-repair rates of proxied traffic ({target})")
    columns = (
        "model",
        "quant",
        "requests",
        "with tools",
        "errors",
        "calls",
        "candidates",
        *BUCKETS,
        "repairs",
        "p50 ms",
    )
    for name in columns:
        table.add_column(name, justify="left" if name in ("model", "quant", "repairs") else "right")
    for r in rows:
        shares = []
        for bucket in BUCKETS:
            share = r.rate(bucket)
            shares.append(f"{r.buckets[bucket]} ({share:.0%})" if share is not None else "0")
        repairs = ", ".join(f"{k} {v}" for k, v in sorted(r.repairs.items())) or "-"
        p50 = f"{r.latency_p50_s * 1000:.1f}" if r.latency_p50_s is not None else "-"
        table.add_row(
            r.model, r.quant, str(r.requests), str(r.tool_requests), str(r.errors), str(r.calls),
            str(r.candidates), *shares, repairs, p50,
        )  # fmt: skip
    Console(width=200, soft_wrap=True).print(table)


def bench_proxy(
    requests: Annotated[int, typer.Option(help="Non-streamed and streamed requests per path.")] = 400,
    streams: Annotated[int, typer.Option(help="Concurrent streams of the soak.")] = 64,
    soak_s: Annotated[float, typer.Option("--soak-s", help="Seconds of the soak (0: none).")] = 60.0,
    loop: Annotated[str, typer.Option("--loop", help="The proxy's event loop: auto, asyncio or uvloop.")] = "auto",
    chunk_gap_ms: Annotated[
        float,
        typer.Option(
            "--chunk-gap-ms",
            min=0,
            help="The scripted upstream's pause between streamed chunks, as a model's decoding step (0: one burst).",
        ),
    ] = 1.0,
) -> None:
    """Added latency and time to first token of the proxy against the same scripted upstream called directly,
    side by side in one run; then concurrent streams through the proxy, checked for loss, corruption and memory."""
    from rich.console import Console

    from tooldispatch.bench.proxy import print_report, run_bench

    console = Console(soft_wrap=True)
    try:
        report = run_bench(
            requests=requests,
            streams=streams,
            soak_s=soak_s,
            loop=loop,
            chunk_gap_ms=chunk_gap_ms,
            progress=console.log,
        )
    except TooldispatchError as exc:
        raise _fail(exc) from exc
    print_report(report, console)


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``proxy`` and ``bench proxy`` to the command line."""
    app.add_typer(proxy_app, name="proxy")
    bench.command("proxy")(bench_proxy)
