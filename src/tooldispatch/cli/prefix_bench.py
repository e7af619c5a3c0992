"""``tooldispatch bench prefix``: an interleaved request against a long conversation's next turn, cache off / on."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from tooldispatch.cli.options import PrefixCacheOpt, ThreadsOpt

DEFAULT_MODEL = "qwen2.5-coder-0.5b-instruct@Q4_K_M"


def bench_prefix(
    model: Annotated[str, typer.Option(help="NAME@QUANT run in process.")] = DEFAULT_MODEL,
    prefix_cache_mb: PrefixCacheOpt = None,
    long_tokens: Annotated[int, typer.Option(min=64, help="About how many tokens conversation A's prompt has.")] = (
        4000
    ),
    round_robin_tokens: Annotated[
        int, typer.Option(min=64, help="About how many tokens each round-robin conversation's prompt has.")
    ] = 1500,
    max_tokens: Annotated[int, typer.Option(min=1, help="Completion tokens per request (greedy).")] = 8,
    n_ctx: Annotated[int, typer.Option(min=256, help="Context window of the in-process model.")] = 8192,
    threads: ThreadsOpt = None,
    only: Annotated[
        str | None, typer.Option(help="Run one scenario only: 'interleaved' or 'round robin'.", metavar="NAME")
    ] = None,
    server_url: Annotated[
        str | None,
        typer.Option(
            help="Also run the scenarios through this llama-server (its /v1 URL), e.g. one started with "
            "-np 2 --cache-reuse 256."
        ),
    ] = None,
    served_model: Annotated[str, typer.Option(help="The server's model name.")] = "qwen2.5-coder-0.5b-instruct",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
) -> None:
    """Time a long conversation's second turn right after its first and after another conversation's request.

    Runs the scenarios in process without the prefix cache (only the last request's prefix is reused, the
    behaviour before the cache), with it (--prefix-cache-mb, else config, else 1024 MB), and through a
    llama-server when --server-url is given, and prints each request's seconds side by side, the ratio
    'turn 2 after an interleaved request / turn 2 right after', and the bytes the cache held.
    """
    from rich.console import Console
    from rich.table import Table

    from tooldispatch.backends.base import Backend
    from tooldispatch.backends.prefix_cache import DEFAULT_PREFIX_CACHE_MB, MB
    from tooldispatch.bench.prefix import TARGET_RATIO, TargetResult, ratio, run_target, scenarios
    from tooldispatch.cli.session import prefix_cache_setting
    from tooldispatch.errors import TooldispatchError
    from tooldispatch.profiles import backend_from_profile

    try:
        bound = prefix_cache_setting(prefix_cache_mb)
    except TooldispatchError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    on_mb = DEFAULT_PREFIX_CACHE_MB if bound is None else bound
    chosen = scenarios(long_tokens=long_tokens, round_robin_tokens=round_robin_tokens)
    if only is not None:
        chosen = [s for s in chosen if s.name == only]
        if not chosen:
            typer.echo("error: --only takes 'interleaved' or 'round robin'", err=True)
            raise typer.Exit(2)

    def in_process(mb: int) -> Any:
        settings: dict[str, Any] = {"model": model, "n_ctx": n_ctx, "prefix_cache_mb": mb}
        if threads:
            settings["n_threads"] = threads
        return lambda: backend_from_profile("cpu-llamacpp", **settings)

    targets: list[tuple[str, Any]] = [("cache off", in_process(0)), (f"cache {on_mb} MB", in_process(on_mb))]
    if server_url:
        from tooldispatch.backends.openai_compat import OpenAICompatBackend

        def server() -> Backend:
            return OpenAICompatBackend(
                base_url=server_url, model=served_model, dialect="llama-server", parse="client", timeout_s=3600
            )

        targets.append(("llama-server", server))
    console = Console(stderr=as_json, highlight=False)
    results = [TargetResult(name) for name, _ in targets]
    try:
        for scenario in chosen:  # scenario by scenario, every target in turn: the figures that matter come first
            for (name, make), result in zip(targets, results, strict=True):
                console.print(f"{scenario.name}, {name}:")
                part = run_target(
                    name,
                    make,
                    [scenario],
                    max_tokens=max_tokens,
                    on_request=lambda t: console.print(
                        f"  {t.label}: {t.seconds:.2f} s, {t.prompt_tokens:,} prompt tokens", highlight=False
                    ),
                )
                result.merge(part)
    except TooldispatchError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
    if as_json:
        out = {
            "model": model,
            "scenarios": {
                s.name: {
                    r.target: {
                        "requests": [
                            {"label": t.label, "seconds": t.seconds, "prompt_tokens": t.prompt_tokens}
                            for t in r.timings[s.name]
                        ],
                        "ratio": ratio(s, r.timings[s.name]),
                    }
                    for r in results
                }
                for s in chosen
            },
            "cache": {r.target: r.cache for r in results if r.cache is not None},
            "target_ratio": TARGET_RATIO,
        }
        typer.echo(json.dumps(out, indent=2))
        return
    for s in chosen:
        table = Table(title=f"{s.name}: seconds per request, {model}, greedy, {max_tokens} completion tokens")
        table.add_column("request")
        table.add_column("prompt tokens", justify="right")
        for r in results:
            table.add_column(r.target, justify="right")
        for i, step in enumerate(s.steps):
            table.add_row(
                step.label,
                f"{results[0].timings[s.name][i].prompt_tokens:,}",
                *(f"{r.timings[s.name][i].seconds:.2f}" for r in results),
            )
        if s.ratio is not None:
            table.add_row("after B / right after", "", *(f"{ratio(s, r.timings[s.name]) or 0:.2f}x" for r in results))
        console.print(table)
    for r in results:
        if r.cache is not None and r.cache["limit_bytes"]:
            console.print(
                f"{r.target}: held at most {r.cache['peak_bytes'] / MB:.1f} MB of saved states "
                f"(bound {r.cache['limit_bytes'] // MB} MB), {r.cache['saves']} saves, {r.cache['restores']} restores"
            )
    identical = all(
        [t.text for t in results[0].timings[s.name]] == [t.text for t in results[1].timings[s.name]] for s in chosen
    )
    console.print(f"answers with the cache off and on: {'identical' if identical else 'DIFFERENT'}")
    inter = next((s for s in chosen if s.ratio is not None), None)
    if inter is not None:
        on = ratio(inter, results[1].timings[inter.name]) or 0.0
        verdict = "meets" if on <= TARGET_RATIO else "misses"
        console.print(f"{results[1].target}: after B / right after {on:.2f}x, target ≤ {TARGET_RATIO:g}x: {verdict}")


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``bench prefix``."""
    bench.command("prefix")(bench_prefix)
