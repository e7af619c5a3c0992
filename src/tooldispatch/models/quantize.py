"""Quantize GGUF files with llama.cpp, and report what a GGUF file really holds.

``quantize_file`` requantizes an already-quantized file (``allow_requantize``); ``pull.quantize`` uses it to
make a manifest's derived quantizations, and labels the result as requantized.
SmolLM2-135M (width 576), Gemma 3 270M (640) and Qwen2.5-0.5B (896) have rows that are not multiples of 256,
so K-quant and IQ targets fall back to other types per tensor; the record beside each file keeps the real
per-tensor types read back from its header.

The ladder types (``LADDER_TYPES``) come from ``llama_cpp.llama_model_quantize``. The importance-matrix
types (``IMATRIX_TYPES``) need per-tensor importance data, which that C call only takes as a C++ object: they
are made by llama.cpp's own ``llama-imatrix`` (on ``calibration_text()``, the matrix cached beside the
source file) and ``llama-quantize --imatrix``, built from the same vendored sources by
``scripts/build-llama-server.sh``.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tooldispatch import packaged
from tooldispatch.errors import BackendUnavailable, ConfigError, ModelNotFoundError
from tooldispatch.models.gguf import LLAMA_FTYPES, GGUFError, read_header
from tooldispatch.models.manifest import IMATRIX_TYPES, LADDER_TYPES
from tooldispatch.models.store import (
    parse_spec,
    read_record,
    sha256_file,
    write_record,
)

QUANT_FTYPES: Mapping[str, int] = {name: i for i, name in LLAMA_FTYPES.items() if name in (*LADDER_TYPES, "F16")}
"""Targets ``quantize_file`` makes with ``llama_model_quantize``, as ``llama_ftype`` ids (from ``llama.h``)."""

IMATRIX_FTYPES: Mapping[str, int] = {name: i for i, name in LLAMA_FTYPES.items() if name in IMATRIX_TYPES}
"""Targets that need an importance matrix (``llama-imatrix`` + ``llama-quantize``)."""

TOOLS_HOME_ENV = "LLAMA_SERVER_HOME"
"""Root of the llama.cpp tools built by ``scripts/build-llama-server.sh`` (``<root>/bin/llama-imatrix``)."""

IMATRIX_CHUNKS = 48
"""Chunks of 512 tokens of the calibration text ``llama-imatrix`` reads (about the whole shipped text)."""


def calibration_text() -> Path:
    """The calibration text shipped in the package (``data/models/calibration/calibration.txt``; its README
    says where it comes from)."""
    return packaged.calibration_text()


def llama_tool(name: str) -> Path:
    """Find a llama.cpp tool (``llama-imatrix``, ``llama-quantize``) built from the vendored sources.

    Raises:
        BackendUnavailable: it is not built; the message says how to build it.
    """
    home = Path(os.environ.get(TOOLS_HOME_ENV, Path.home() / ".cache" / "tooldispatch" / "llama-server"))
    candidate = home / "bin" / name
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    found = shutil.which(name)
    if found:
        return Path(found)
    raise BackendUnavailable(
        f"{name} is not built; build it from llama-cpp-python's vendored llama.cpp with: "
        "scripts/build-llama-server.sh (it installs llama-server, llama-imatrix and llama-quantize)"
    )


def _run_tool(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise BackendUnavailable(f"{what} failed (exit {proc.returncode}): {tail}")


def importance_matrix(
    src: Path, *, nthread: int | None = None, force: bool = False, chunks: int = IMATRIX_CHUNKS
) -> Path:
    """Compute (or reuse) the importance matrix of ``src`` on ``chunks`` chunks of the shipped calibration text.

    The matrix is cached beside the model as ``<file>.imatrix.gguf`` and reused while the model, the
    calibration text and the chunk count are unchanged (recorded next to it).

    Raises:
        BackendUnavailable: ``llama-imatrix`` is not built, or it failed.
        ConfigError: the calibration text is missing.
    """
    text = calibration_text()
    if not text.is_file():
        raise ConfigError(
            f"the calibration text {text} is missing; reinstall: pip install --force-reinstall tooldispatch"
        )
    out = src.with_name(src.stem + ".imatrix.gguf")
    stamp: dict[str, object] = {
        "model_sha256": (read_record(src) or {}).get("sha256"),
        "calibration_sha256": sha256_file(text),
        "chunks": chunks,
    }
    record = read_record(out)
    if not force and out.is_file() and record and all(record.get(k) == v for k, v in stamp.items()):
        return out
    threads = str(nthread or max(1, os.cpu_count() or 1))
    tmp = out.with_name(out.name + ".tmp.gguf")
    cmd = [str(llama_tool("llama-imatrix")), "-m", str(src), "-f", str(text), "-o", str(tmp)]
    cmd += ["-c", "512", "--chunks", str(chunks), "-t", threads, "-ngl", "0", "--no-ppl"]
    try:
        _run_tool(cmd, f"llama-imatrix on {src.name}")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, out)
    write_record(
        out,
        sha256_file(out),
        source="llama-imatrix",
        calibration=text.name,
        model_sha256=stamp["model_sha256"],
        calibration_sha256=stamp["calibration_sha256"],
        chunks=chunks,
    )
    return out


def quantize_with_imatrix(src: Path, dst: Path, target: str, imatrix: Path, *, nthread: int | None = None) -> None:
    """Quantize ``src`` into ``dst`` with ``llama-quantize --imatrix`` (requantizing allowed).

    Raises:
        ConfigError: ``target`` is not an importance-matrix type.
        BackendUnavailable: ``llama-quantize`` is not built, or it failed.
    """
    if target not in IMATRIX_FTYPES:
        raise ConfigError(f"{target!r} is not an importance-matrix type; choose one of {', '.join(IMATRIX_FTYPES)}")
    threads = str(nthread or max(1, os.cpu_count() or 1))
    cmd = [str(llama_tool("llama-quantize")), "--allow-requantize", "--imatrix", str(imatrix)]
    cmd += [str(src), str(dst), target, threads]
    try:
        _run_tool(cmd, f"llama-quantize {src.name} -> {target}")
    except BackendUnavailable:
        dst.unlink(missing_ok=True)
        raise


def quantize_file(src: Path, dst: Path, target: str, *, nthread: int | None = None, verbose: bool = False) -> None:
    """Quantize ``src`` into ``dst`` with ``llama_model_quantize`` (requantizing allowed).

    llama.cpp's per-tensor log lines go to stderr only when ``verbose``.

    Raises:
        ConfigError: ``target`` is not a supported type.
        BackendUnavailable: ``llama_cpp`` is not installed, or llama.cpp reported a failure.
    """
    ftype = QUANT_FTYPES.get(target)
    if ftype is None:
        hint = " (it needs an importance matrix: use quantize_with_imatrix)" if target in IMATRIX_FTYPES else ""
        raise ConfigError(f"cannot quantize to {target!r}{hint}; choose one of {', '.join(QUANT_FTYPES)}")
    try:
        import llama_cpp  # optional dependency, loaded on use
    except ImportError as exc:
        raise BackendUnavailable(
            "quantizing needs llama-cpp-python; install it with: pip install 'tooldispatch[llama]'"
        ) from exc
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True
    params.nthread = nthread if nthread is not None else max(1, (os.cpu_count() or 1))
    engine_log = logging.getLogger("llama-cpp-python")  # the logger llama-cpp-python routes llama.cpp logs through
    level = engine_log.level
    engine_log.setLevel(logging.DEBUG if verbose else logging.ERROR)
    try:
        rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), params)
    finally:
        engine_log.setLevel(level)
    if rc != 0:
        dst.unlink(missing_ok=True)
        raise BackendUnavailable(f"llama_model_quantize({src.name} -> {target}) failed with code {rc}")


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What a GGUF file really holds.

    Attributes:
        path: the file.
        size_bytes: its size.
        gguf_version: GGUF format version.
        architecture: ``general.architecture``.
        name: ``general.name``.
        declared_type: ``general.file_type`` as a name (what the file says it is).
        tensor_types: tensor count per real ``ggml_type``, most common first.
        n_tensors: number of tensors.
        n_params: number of weights.
        has_chat_template: whether ``tokenizer.chat_template`` is present.
        provenance: the cache record (source, requantized-from), when the file is in the cache.
    """

    path: Path
    size_bytes: int
    gguf_version: int
    architecture: str | None
    name: str | None
    declared_type: str | None
    tensor_types: Mapping[str, int]
    n_tensors: int
    n_params: int
    has_chat_template: bool
    provenance: Mapping[str, Any] = field(default_factory=dict)

    @property
    def bits_per_weight(self) -> float:
        """File size in bits over the number of weights (includes metadata; close for large files)."""
        return 8.0 * self.size_bytes / self.n_params if self.n_params else 0.0

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serializable form."""
        return {
            "path": str(self.path),
            "size_bytes": self.size_bytes,
            "gguf_version": self.gguf_version,
            "architecture": self.architecture,
            "name": self.name,
            "declared_type": self.declared_type,
            "tensor_types": dict(self.tensor_types),
            "n_tensors": self.n_tensors,
            "n_params": self.n_params,
            "bits_per_weight": round(self.bits_per_weight, 3),
            "has_chat_template": self.has_chat_template,
            "provenance": dict(self.provenance),
        }


def info(path: str | Path) -> ModelInfo:
    """Read a GGUF file's header and report its declared and real tensor types.

    Args:
        path: a ``.gguf`` file, or ``name@QUANT`` of a cached model.

    Raises:
        ModelNotFoundError: the file is missing, or is not a readable GGUF file.
    """
    by_name = isinstance(path, str) and not path.endswith(".gguf") and "@" in path
    p = parse_spec(str(path)).path if by_name else Path(path)
    if not p.is_file():
        raise ModelNotFoundError(f"no model file at {p}; pull it first (tooldispatch models pull NAME@QUANT)")
    try:
        header = read_header(p)
    except GGUFError as exc:
        raise ModelNotFoundError(f"{p} is not a usable GGUF file ({exc}); pull it again with --force") from exc
    meta = header.metadata
    arch = meta.get("general.architecture")
    name = meta.get("general.name")
    return ModelInfo(
        path=p,
        size_bytes=p.stat().st_size,
        gguf_version=header.version,
        architecture=arch if isinstance(arch, str) else None,
        name=name if isinstance(name, str) else None,
        declared_type=header.file_type,
        tensor_types=header.type_histogram(),
        n_tensors=len(header.tensors),
        n_params=sum(t.n_elements for t in header.tensors),
        has_chat_template=header.chat_template is not None,
        provenance={k: v for k, v in (read_record(p) or {}).items() if k not in ("size", "mtime_ns")},
    )
