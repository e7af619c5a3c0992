"""The backend kinds: the one place that knows them (``KINDS``).

A profile's ``backend`` key, the benchmark's ``--backend`` and the proxy's upstream all name a kind from it, and
everything else asks it what a kind is (``kind``: in process or a server) instead of comparing names;
``profiles.factory`` builds the backend of each.

Benchmark records name a cell's backend with their own labels, kept as they were so that committed corpora,
cell keys (``llamacpp|model@quant|client|free``) and published summaries stay valid: ``llamacpp`` for the
in-process kind, and for a server ``openrouter`` on the OpenRouter dialect and ``openai`` on the others.
``record_label`` writes them and ``read_backend`` reads them (and ``--backend``'s older names) back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from tooldispatch.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Kind:
    """A backend kind.

    Attributes:
        name: its name in profiles and on the command line (``llamacpp``, ``openai_compat``).
        in_process: the model runs in this process (no server to start, no ``[client]`` table).
        what: one line for help and error messages.
    """

    name: str
    in_process: bool
    what: str


KINDS: Final = {
    "llamacpp": Kind("llamacpp", in_process=True, what="llama.cpp in process"),
    "openai_compat": Kind("openai_compat", in_process=False, what="an OpenAI-compatible server or OpenRouter"),
}
_RECORDED: Final = {"openai": ("openai_compat", None), "openrouter": ("openai_compat", "openrouter")}
"""The benchmark's record labels of the server kind (and ``--backend``'s older names): kind and dialect."""


def kind(name: object, *, where: str = "") -> Kind:
    """The kind called ``name``.

    Raises:
        ConfigError: no kind has that name (the message lists them, prefixed with ``where``).
    """
    found = KINDS.get(name) if isinstance(name, str) else None
    if found is None:
        names = " or ".join(repr(k) for k in KINDS)
        raise ConfigError(f"{where}'backend' must be {names}, got {name!r}")
    return found


def read_backend(name: str, dialect: str | None = None) -> tuple[Kind, str | None]:
    """The kind and dialect a benchmark's ``--backend`` (or a record's label) names: a kind, or one of the
    record labels (``openai``; ``openrouter``, which implies its dialect).

    Raises:
        ConfigError: an unknown name.
    """
    if name in _RECORDED:
        kind_name, implied = _RECORDED[name]
        return KINDS[kind_name], implied or dialect
    if name not in KINDS:
        raise ConfigError(f"unknown backend {name!r}; use {', '.join(KINDS)} (or openrouter)")
    return KINDS[name], dialect


def record_label(kind_: Kind, dialect: str | None = None) -> str:
    """The label a benchmark record gives a cell's backend (see the module's text)."""
    if kind_.in_process:
        return kind_.name
    return "openrouter" if dialect == "openrouter" else "openai"
