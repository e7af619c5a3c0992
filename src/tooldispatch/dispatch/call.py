"""What the dispatcher keeps about one call as it moves through the pipeline, and how calls are given to it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tooldispatch.dispatch.registry import ToolDef
from tooldispatch.dispatch.saga import SagaEntry
from tooldispatch.errors import ConfigError
from tooldispatch.types import Checked

StopCheck = Callable[[], str | None]
"""Asked before a call starts: ``None`` to go on, or the message saying why it (and the rest) will not run."""
CallInput = Any  # a ToolCall, a {"name", "arguments"} mapping, or a (name, arguments) pair


@dataclass(slots=True)
class Call:
    """Mutable facts gathered while one call moves through the pipeline."""

    trace_id: str
    session_id: str
    name: str
    raw_args: Any
    trigger: str
    call_id: str | None
    t0: float
    wall0: float
    tool: ToolDef | None = None
    args: dict[str, Any] = field(default_factory=dict)
    repairs: list[Any] = field(default_factory=list)
    latencies: dict[str, float] = field(default_factory=dict)
    attempts: int = 0
    retried: bool = False
    idem_key: str | None = None
    approval_id: str | None = None
    approved: bool = False
    compensation: SagaEntry | None = None
    possibly_running: bool = False
    bounded_chars: int = 0
    idem_expires_at: float | None = None
    checked: Checked | None = None


def call_parts(item: CallInput) -> tuple[str, Any, str | None, tuple[Any, ...], Checked | None]:
    """A call's name, arguments, id, parser repairs and parser stamp (only a ``ToolCall`` carries the last two)."""
    if isinstance(item, Mapping):
        inner = item.get("function")
        fn: Mapping[str, Any] = inner if isinstance(inner, Mapping) else item
        return str(fn.get("name")), fn.get("arguments"), item.get("id"), (), None
    if isinstance(item, tuple | list) and len(item) == 2:
        return str(item[0]), item[1], None, (), None
    name = getattr(item, "name", None)
    if name is not None:
        checked = getattr(item, "checked", None)
        return (
            str(name),
            getattr(item, "arguments", None),
            getattr(item, "id", None),
            tuple(getattr(item, "repairs", ())),
            checked if isinstance(checked, Checked) else None,
        )
    raise ConfigError(f"cannot read a call from {item!r:.120}; pass ToolCall values, mappings or (name, args) pairs")
