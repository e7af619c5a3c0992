"""Python tools served by the gateway in its tests; each side effect is a line in $GATEWAY_EFFECTS."""

from __future__ import annotations

import os

from tooldispatch.dispatch import Registry

registry = Registry()


def _effect(line: str) -> None:
    with open(os.environ["GATEWAY_EFFECTS"], "a", encoding="utf-8") as f:
        f.write(line + "\n")


@registry.tool(quota={"limit": 2})
def reserve(slot: str) -> dict[str, str]:
    """Reserve a slot (at most two per session).

    Args:
        slot: the slot to reserve.
    """
    _effect(f"reserve {slot}")
    return {"reserved": slot}


@registry.tool(destructive=True)
def wipe(target: str) -> dict[str, str]:
    """Wipe a target (destructive, nothing undoes it: each call needs a person's approval).

    Args:
        target: what to wipe.
    """
    _effect(f"wipe {target}")
    return {"wiped": target}
