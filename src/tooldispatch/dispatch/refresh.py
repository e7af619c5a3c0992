"""Refresh on stale state: the read-only call the dispatcher may run itself when a write is refused as stale.

A tool that ``requires_fresh_state`` is refused (``stale_state_must_refresh``) until a tool that
``refreshes`` the same state succeeded recently in the session. Small models often repeat the refused call
instead of following the suggestion. When a caller opts in (``Agent(auto_refresh=True)``), the refresher is
run for them, but only when it is declared read-only (``read_only=True``, never the conservative ``None``)
and every argument it requires can be taken, by name, from the refused call's arguments. Both calls go
through the whole dispatch pipeline and are traced; the refresh is marked with its own trigger.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tooldispatch.dispatch.registry import Registry

STALE_REASON = "stale_state_must_refresh"
"""The rejection reason a refresh can cure."""


def refresher_call(registry: Registry, name: str, arguments: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The refresher call to run before retrying ``name(arguments)``, or ``None`` when none may run.

    Args:
        registry: the tools.
        name: the refused tool.
        arguments: the refused call's arguments.

    Returns:
        ``(refresher name, its arguments)``: the refresher's declared properties taken from ``arguments``.
    """
    tool = registry.get(name)
    fresh = tool.requires_fresh_state if tool is not None else None
    if fresh is None:
        return None
    refresher_name = registry.refresher_for(fresh.resource)
    refresher = registry.get(refresher_name) if refresher_name else None
    if refresher is None or refresher.read_only is not True:
        return None
    schema = refresher.schema
    properties = schema.get("properties", {})
    required = schema.get("required", [])
    args = {k: v for k, v in arguments.items() if isinstance(properties, Mapping) and k in properties}
    if any(k not in args for k in required):
        return None
    return refresher.name, args
