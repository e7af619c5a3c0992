"""tooldispatch: the dispatch layer for agents on local, quantized models.

The public API is the names in ``__all__``; everything else is private and may change. Names are
imported on first use so that ``import tooldispatch`` stays cheap for the command line.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from tooldispatch import _compiled

if TYPE_CHECKING:
    from tooldispatch.agent import (
        Agent,
        AgentRun,
        Budget,
    )
    from tooldispatch.backends.base import (
        Backend,
        ChatRequest,
    )
    from tooldispatch.backends.openai_compat import (
        OpenAICompatBackend,
    )
    from tooldispatch.backends.scripted import (
        ScriptedBackend,
        ScriptedTurn,
    )
    from tooldispatch.dispatch import (
        Dispatcher,
        DispatchResult,
        DispatchTrace,
        ManualClock,
        MetricsReport,
        PendingApproval,
        Registry,
        ToolDef,
    )
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
    from tooldispatch.parsing.core import (
        parse_tool_calls,
    )
    from tooldispatch.parsing.stream import (
        StreamParser,
    )
    from tooldispatch.profiles import (
        backend_from_profile,
        load_profile,
    )
    from tooldispatch.repair import (
        RepairResult,
        repair_call,
        resolve_name,
    )
    from tooldispatch.sources import (
        ToolSources,
        load_sources,
    )
    from tooldispatch.toolspec import (
        ToolSpec,
        normalize_tools,
    )
    from tooldispatch.types import (
        Candidate,
        ParseOutcome,
        Repair,
        ToolCall,
    )

__version__ = "0.1.0"

_compiled.check()  # a source checkout must not run compiled modules older than their sources

_EXPORTS: dict[str, str] = {
    "Agent": "tooldispatch.agent",
    "AgentRun": "tooldispatch.agent",
    "Backend": "tooldispatch.backends.base",
    "BackendError": "tooldispatch.errors",
    "BackendUnavailable": "tooldispatch.errors",
    "Budget": "tooldispatch.agent",
    "Candidate": "tooldispatch.types",
    "ChatRequest": "tooldispatch.backends.base",
    "ConfigError": "tooldispatch.errors",
    "DispatchResult": "tooldispatch.dispatch",
    "DispatchTrace": "tooldispatch.dispatch",
    "Dispatcher": "tooldispatch.dispatch",
    "ManualClock": "tooldispatch.dispatch",
    "MetricsReport": "tooldispatch.dispatch",
    "ModelNotFoundError": "tooldispatch.errors",
    "ModelOutputError": "tooldispatch.errors",
    "OpenAICompatBackend": "tooldispatch.backends.openai_compat",
    "ParseOutcome": "tooldispatch.types",
    "PendingApproval": "tooldispatch.dispatch",
    "ProviderError": "tooldispatch.errors",
    "RateLimited": "tooldispatch.errors",
    "RegistrationError": "tooldispatch.errors",
    "Registry": "tooldispatch.dispatch",
    "Repair": "tooldispatch.types",
    "RepairResult": "tooldispatch.repair",
    "ScriptedBackend": "tooldispatch.backends.scripted",
    "ScriptedTurn": "tooldispatch.backends.scripted",
    "StreamParser": "tooldispatch.parsing.stream",
    "ToolCall": "tooldispatch.types",
    "ToolDef": "tooldispatch.dispatch",
    "ToolError": "tooldispatch.errors",
    "ToolSources": "tooldispatch.sources",
    "ToolSpec": "tooldispatch.toolspec",
    "ToolTimeout": "tooldispatch.errors",
    "TooldispatchError": "tooldispatch.errors",
    "backend_from_profile": "tooldispatch.profiles",
    "load_profile": "tooldispatch.profiles",
    "load_sources": "tooldispatch.sources",
    "normalize_tools": "tooldispatch.toolspec",
    "parse_tool_calls": "tooldispatch.parsing.core",
    "repair_call": "tooldispatch.repair",
    "resolve_name": "tooldispatch.repair",
}

__all__ = [
    "Agent",
    "AgentRun",
    "Backend",
    "BackendError",
    "BackendUnavailable",
    "Budget",
    "Candidate",
    "ChatRequest",
    "ConfigError",
    "DispatchResult",
    "DispatchTrace",
    "Dispatcher",
    "ManualClock",
    "MetricsReport",
    "ModelNotFoundError",
    "ModelOutputError",
    "OpenAICompatBackend",
    "ParseOutcome",
    "PendingApproval",
    "ProviderError",
    "RateLimited",
    "RegistrationError",
    "Registry",
    "Repair",
    "RepairResult",
    "ScriptedBackend",
    "ScriptedTurn",
    "StreamParser",
    "ToolCall",
    "ToolDef",
    "ToolError",
    "ToolSources",
    "ToolSpec",
    "ToolTimeout",
    "TooldispatchError",
    "backend_from_profile",
    "load_profile",
    "load_sources",
    "normalize_tools",
    "parse_tool_calls",
    "repair_call",
    "resolve_name",
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
