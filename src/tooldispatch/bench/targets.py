"""Turn command-line choices into matrix targets: which backend, which weights, which route.

The backend is one of the profiles' kinds (``profiles.factory.KINDS``), or a label the records use:

- ``llamacpp``: one cell per ``name@QUANT`` (× constrained off/on); the weights are resolved through
  ``tooldispatch.models`` (pulled or derived beforehand), and their real tensor types are read from the file.
- ``openai_compat`` (recorded as ``openai``): a running OpenAI-compatible server (vLLM, llama-server, by
  ``--dialect``); one cell per parse mode.
- ``openai_compat`` with the ``openrouter`` dialect, or ``openrouter`` for short (recorded as ``openrouter``):
  one cell per provider quantization, each pinned (``quantizations: [q]``, ``only``, ``allow_fallbacks: false``,
  ``require_parameters: true``) so that no cell is silently served by another route.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tooldispatch.backends.base import Backend
from tooldispatch.bench.corpus import Cell
from tooldispatch.bench.runner import ModelFacts, Target
from tooldispatch.errors import ConfigError
from tooldispatch.profiles.kinds import read_backend, record_label

OPENROUTER_URL = "https://openrouter.ai/api/v1"
OPENROUTER_KEY_ENV = "OPENROUTER_API_KEY"


CONSTRAINED_MODES = ("off", "on", "required")
"""``--constrained`` values: free decoding, grammar with tool_choice auto, grammar with every output a call."""


@dataclass(frozen=True, slots=True)
class MatrixSpec:
    """What the user asked to run.

    Attributes:
        backend: a backend kind (``llamacpp``, ``openai_compat``) or a record label (``openai``, ``openrouter``).
        models: ``name@QUANT`` specs (llamacpp) or one served model name (a server).
        parse_modes: ``client`` and/or ``server`` (server needs an HTTP backend).
        constrained: ``off``, ``on`` (constrained, tool_choice auto) and/or ``required`` (constrained, every
            output a call); llamacpp only.
        base_url: the server (OpenRouter's own URL on the ``openrouter`` dialect).
        dialect: ``vllm``, ``llama-server`` or ``openrouter`` for a server.
        quant_label: how a server's weights are labelled in reports (``nvfp4``).
        provider_quantizations: OpenRouter quantizations, one cell each.
        provider_only: OpenRouter provider slugs to allow.
        n_threads: CPU threads for llama.cpp.
        n_ctx: context length for llama.cpp (``None``: the model's own, capped; see ``LlamaCppBackend``).
        api_key_env: environment variable holding the key (OpenRouter, or a protected server).
    """

    backend: str
    models: Sequence[str]
    parse_modes: Sequence[str] = ("client",)
    constrained: Sequence[str] = ("off",)
    base_url: str = ""
    dialect: str = "vllm"
    quant_label: str = "served"
    provider_quantizations: Sequence[str] = ()
    provider_only: Sequence[str] = ()
    n_threads: int | None = None
    n_ctx: int | None = None
    api_key_env: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)


def build_targets(spec: MatrixSpec) -> list[Target]:
    """Build the targets for a matrix.

    Raises:
        ConfigError: an unknown backend, a server parse mode on llama.cpp, a missing ``--base-url``, or a
            model that is not available locally (the message names the command that fixes it).
    """
    kind, dialect = read_backend(spec.backend, spec.dialect)
    if kind.in_process:
        return _llamacpp_targets(spec, record_label(kind))
    return _http_targets(spec, dialect or "vllm", record_label(kind, dialect))


def _llamacpp_targets(spec: MatrixSpec, label: str) -> list[Target]:
    from tooldispatch import models

    if any(m != "client" for m in spec.parse_modes):
        raise ConfigError("the llamacpp backend has no server parse mode; use --parse-modes client")
    targets: list[Target] = []
    for model_spec in spec.models:
        parsed = models.parse_spec(model_spec)
        path = models.resolve(model_spec)
        facts = models.info(path)
        engine_version = _llama_cpp_version()
        for mode in spec.constrained:
            if mode not in CONSTRAINED_MODES:
                raise ConfigError(f"unknown constrained mode {mode!r}; use off, on or required")
            cell = Cell(
                backend=label,
                model=parsed.manifest.id,
                quant=parsed.quant.name,
                parse_mode="client",
                constrained=mode != "off",
                tool_choice="required" if mode == "required" else "auto",
            )
            targets.append(
                Target(
                    cell=cell,
                    make_backend=_llamacpp_factory(model_spec, spec),
                    facts=ModelFacts(
                        family=parsed.manifest.family,
                        tool_format=parsed.manifest.tool_format,
                        tensor_types=dict(facts.tensor_types),
                        model_file=path.name,
                        engine_version=engine_version,
                    ),
                )
            )
    return targets


def _llama_cpp_version() -> str:
    try:
        import llama_cpp
    except ImportError:
        return ""
    return f"llama-cpp-python {getattr(llama_cpp, '__version__', '')}".strip()


def _llamacpp_factory(model_spec: str, spec: MatrixSpec) -> Any:
    def make() -> Backend:
        from tooldispatch.backends.llamacpp import LlamaCppBackend

        kwargs: dict[str, Any] = {"n_ctx": spec.n_ctx} if spec.n_ctx else {}
        if spec.n_threads:
            kwargs["n_threads"] = spec.n_threads
        backend: Backend = LlamaCppBackend(model_spec, **kwargs)
        return backend

    return make


def openrouter_provider(quantization: str, only: Sequence[str]) -> dict[str, Any]:
    """The pinned OpenRouter ``provider`` object for one quantization."""
    provider: dict[str, Any] = {
        "quantizations": [quantization],
        "allow_fallbacks": False,
        "require_parameters": True,
    }
    if only:
        provider["only"] = list(only)
    return provider


def _unpinned(only: Sequence[str]) -> dict[str, Any]:
    provider: dict[str, Any] = {"allow_fallbacks": False, "require_parameters": True}
    if only:
        provider["only"] = list(only)
    return provider


def _http_targets(spec: MatrixSpec, dialect: str, label: str) -> list[Target]:
    if len(spec.models) != 1:
        raise ConfigError(
            f"--backend {spec.backend} runs one served model; pass --model NAME (got {list(spec.models)})"
        )
    if any(mode != "off" for mode in spec.constrained):
        raise ConfigError("constrained decoding is only measured on the llamacpp backend; drop --constrained on")
    model = spec.models[0]
    routes: list[tuple[str, dict[str, Any] | None]]
    key_env: str | None
    openrouter = dialect == "openrouter"
    if openrouter:
        quants = list(spec.provider_quantizations)
        routes = [(q, openrouter_provider(q, spec.provider_only)) for q in quants] or [
            ("default", _unpinned(spec.provider_only))
        ]
        base_url, key_env = spec.base_url or OPENROUTER_URL, spec.api_key_env or OPENROUTER_KEY_ENV
    else:
        if not spec.base_url:
            raise ConfigError(f"--backend {spec.backend} needs --base-url (e.g. http://spark:8000/v1)")
        routes = [(spec.quant_label, None)]
        base_url, key_env = spec.base_url, spec.api_key_env
    targets: list[Target] = []
    for quant, provider in routes:
        for parse_mode in spec.parse_modes:
            cell = Cell(backend=label, model=model, quant=quant, parse_mode=parse_mode)
            targets.append(
                Target(
                    cell=cell,
                    make_backend=_http_factory(base_url, model, dialect, key_env, parse_mode, provider, spec.extra),
                    facts=ModelFacts(family=model, tool_format="hermes"),
                    safe_names=openrouter and parse_mode == "server",
                )
            )
    return targets


def _http_factory(
    base_url: str,
    model: str,
    dialect: str,
    key_env: str | None,
    parse_mode: str,
    provider: Mapping[str, Any] | None,
    extra: Mapping[str, Any],
) -> Any:
    def make() -> Backend:
        from tooldispatch.backends.openai_compat import OpenAICompatBackend

        backend: Backend = OpenAICompatBackend(
            base_url=base_url,
            model=model,
            dialect=dialect,  # type: ignore[arg-type]  # checked by the backend, with a clear error
            api_key_env=key_env,
            parse=parse_mode,  # type: ignore[arg-type]  # same
            provider=provider,
            extra_body=extra,
        )
        return backend

    return make
