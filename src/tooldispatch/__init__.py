"""tooldispatch: the dispatch layer for agents on local, quantized models.

The public API is the names in ``__all__``; everything else is private and may change. Names are
imported on first use so that ``import tooldispatch`` stays cheap for the command line.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tooldispatch.errors import (
        BackendError,
        BackendUnavailable,
        ConfigError,
        ModelNotFoundError,
        ModelOutputError,
        ProviderError,
        RateLimited,
        RegistrationError,
        TooldispatchError,
        ToolError,
        ToolTimeout,
    )
    from tooldispatch.toolspec import ToolSpec, normalize_tools
    from tooldispatch.types import Candidate, ParseOutcome, Repair, ToolCall

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "BackendError": "tooldispatch.errors",
    "BackendUnavailable": "tooldispatch.errors",
    "Candidate": "tooldispatch.types",
    "ConfigError": "tooldispatch.errors",
    "ModelNotFoundError": "tooldispatch.errors",
    "ModelOutputError": "tooldispatch.errors",
    "ParseOutcome": "tooldispatch.types",
    "ProviderError": "tooldispatch.errors",
    "RateLimited": "tooldispatch.errors",
    "RegistrationError": "tooldispatch.errors",
    "Repair": "tooldispatch.types",
    "ToolCall": "tooldispatch.types",
    "ToolError": "tooldispatch.errors",
    "ToolSpec": "tooldispatch.toolspec",
    "ToolTimeout": "tooldispatch.errors",
    "TooldispatchError": "tooldispatch.errors",
    "normalize_tools": "tooldispatch.toolspec",
}

__all__ = [
    "BackendError",
    "BackendUnavailable",
    "Candidate",
    "ConfigError",
    "ModelNotFoundError",
    "ModelOutputError",
    "ParseOutcome",
    "ProviderError",
    "RateLimited",
    "RegistrationError",
    "Repair",
    "ToolCall",
    "ToolError",
    "ToolSpec",
    "ToolTimeout",
    "TooldispatchError",
    "normalize_tools",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tooldispatch' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
