"""The demo world's tools registered with the dispatch metadata the scenario needs."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from tooldispatch.tools.demo._world import ORDER_STATUSES, DemoWorld

if TYPE_CHECKING:
    from tooldispatch.dispatch import Registry

SOURCE = "tooldispatch.tools.demo"
VERSION = "1"


def _obj(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


_ZONE = {"type": "string", "description": "zone name, e.g. 'north'"}
_DRIVER = {"type": "string", "description": "driver id, e.g. 'd-north-1'"}
_ORDER = {"type": "string", "description": "order id, e.g. 'o-101'"}

SCHEMAS: dict[str, dict[str, Any]] = {
    "list_drivers": _obj({"zone": _ZONE}, ["zone"]),
    "refresh_drivers": _obj(
        {"zone": {"type": "string", "description": "zone name; omit it to refresh every zone"}}, []
    ),
    "get_order": _obj({"order_id": _ORDER}, ["order_id"]),
    "list_orders": _obj(
        {"status": {"type": "string", "enum": list(ORDER_STATUSES), "description": "only orders with this status"}},
        [],
    ),
    "assign_driver": _obj({"driver_id": _DRIVER, "order_id": _ORDER}, ["driver_id", "order_id"]),
    "unassign_driver": _obj({"driver_id": _DRIVER, "order_id": _ORDER}, ["driver_id", "order_id"]),
    "send_message": _obj(
        {
            "to": {"type": "string", "description": "recipient id, e.g. the order's customer 'c-101'"},
            "subject": {"type": "string"},
            "body": {"type": "string"},
        },
        ["to", "subject", "body"],
    ),
    "cancel_order": _obj(
        {"order_id": _ORDER, "reason": {"type": "string", "description": "why, as told to the customer"}},
        ["order_id", "reason"],
    ),
}
"""The JSON Schema of each demo tool's arguments."""


def build_registry(world: DemoWorld, registry: Registry | None = None) -> Registry:
    """Register the logistics tools of ``world`` with their dispatch metadata.

    - ``list_drivers``, ``get_order``, ``list_orders``: read-only and concurrency-safe.
    - ``refresh_drivers``: read-only; refreshes the ``drivers`` state.
    - ``assign_driver``: destructive; 3 per ``driver_id``; needs ``drivers`` observed in the last 30 s;
      compensated by ``unassign_driver``.
    - ``unassign_driver``: destructive (the saga inverse); no approval, so a rollback can run it.
    - ``send_message``: side-effecting, idempotent on ``to`` + ``subject``.
    - ``cancel_order``: destructive; needs a human's approval; undeclared argument keys are always refused.
    - ``assign_driver``, ``unassign_driver`` and ``cancel_order`` act on the order (``acts_on=["order_id"]``):
      a successful one ends the stored results and pending compensations of earlier ones on the same order,
      so an assignment undone or replaced is assigned again rather than replayed.
    - every other tool: ``extra_arguments="ignore"`` (its effect is set by its declared arguments alone).

    Args:
        world: the world whose state the tools act on.
        registry: a registry to add to; a new one when omitted.

    Returns:
        The registry holding the eight tools.
    """
    from tooldispatch.dispatch import Registry

    reg = registry if registry is not None else Registry()
    # Every tool but cancel_order acts on its declared arguments alone, so an undeclared key carries nothing it
    # would use: extra_arguments="ignore" lets a caller that opts in drop it. A cancellation is approved by a
    # person as written, so cancel_order refuses undeclared keys.
    common: dict[str, Any] = {"source": SOURCE, "version": VERSION, "extra_arguments": "ignore"}
    for name in ("list_drivers", "get_order", "list_orders"):
        reg.register(name, getattr(world, name), schema=SCHEMAS[name], read_only=True, concurrency_safe=True, **common)
    reg.register(
        "refresh_drivers",
        world.refresh_drivers,
        schema=SCHEMAS["refresh_drivers"],
        read_only=True,
        concurrency_safe=True,
        refreshes="drivers",
        **common,
    )
    reg.register(
        "unassign_driver",
        world.unassign_driver,
        schema=SCHEMAS["unassign_driver"],
        read_only=False,
        destructive=True,
        requires_approval=False,
        acts_on=["order_id"],
        **common,
    )
    reg.register(
        "assign_driver",
        world.assign_driver,
        schema=SCHEMAS["assign_driver"],
        read_only=False,
        destructive=True,
        quota={"limit": 3, "per": "driver_id"},
        requires_fresh_state={"resource": "drivers", "max_age_s": 30},
        compensate="unassign_driver",
        acts_on=["order_id"],
        **common,
    )
    reg.register(
        "send_message",
        world.send_message,
        schema=SCHEMAS["send_message"],
        read_only=False,
        destructive=False,
        idempotency_fields=["to", "subject"],
        idempotency_ttl_s=3600,
        timeout_s=10,
        **common,
    )
    reg.register(
        "cancel_order",
        world.cancel_order,
        schema=SCHEMAS["cancel_order"],
        read_only=False,
        destructive=True,
        requires_approval=True,
        acts_on=["order_id"],
        **{**common, "extra_arguments": "forbid"},
    )
    return reg


WORLD_ENV = "TOOLDISPATCH_DEMO_WORLD"
"""Environment variable naming the demo world's SQLite file for ``registry_from_env``."""


def registry_from_env() -> Registry:
    """The demo registry over the world file named by ``TOOLDISPATCH_DEMO_WORLD`` (seeded when new).

    Lets the command line resume demo calls, e.g.
    ``tooldispatch approvals approve ID --tools tooldispatch.tools.demo:registry_from_env``.
    The file defaults to ``demo-world.db`` in the current folder.
    """
    return build_registry(DemoWorld.seed(os.environ.get(WORLD_ENV, "demo-world.db")))
