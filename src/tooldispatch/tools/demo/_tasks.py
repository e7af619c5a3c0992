"""Tasks for an agent in the logistics world, each scored by the world's final state."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tooldispatch.tools.demo._world import DemoWorld


@dataclass(frozen=True, slots=True)
class DemoTask:
    """One thing to ask an agent to do in a freshly seeded world.

    Attributes:
        id: a short stable name.
        prompt: the user message given to the agent.
        check: ``True`` when the world's final state (and, for a question, the agent's final answer) shows the
            task done, and nothing else changed.
        setup: arranges the world before the agent starts (``None``: the seeded world as is).
        needs_approval: whether finishing the task takes a call that a human must approve.
    """

    id: str
    prompt: str
    check: Callable[[DemoWorld, str], bool]
    setup: Callable[[DemoWorld], None] | None = None
    needs_approval: bool = False


def _on_shift_in(world: DemoWorld, zone: str) -> set[str]:
    return {d["id"] for d in world.list_drivers(zone)["drivers"] if d["on_shift"]}


def _check_assign_north(world: DemoWorld, answer: str) -> bool:
    order = world.order("o-101")
    messages = [m for m in world.outbox() if m["to"] == "c-101"]
    return (
        order["status"] == "assigned"
        and order["driver_id"] in _on_shift_in(world, "north")
        and len(messages) == 1
        and world.count_effects("assign_driver") == 1
        and world.count_effects() == 2
    )


def _check_message_delay(world: DemoWorld, answer: str) -> bool:
    messages = world.outbox()
    return (
        len(messages) == 1
        and messages[0]["to"] == "c-202"
        and "30" in messages[0]["body"]
        and world.count_effects() == 1
    )


_NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
# A count written in the answer: digits or a number word, not part of an id such as ``o-201``.
_COUNT = re.compile(r"(?<![\w-])(\d+|" + "|".join(_NUMBER_WORDS) + r")(?![\w-])", re.IGNORECASE)


def _check_pending_south(world: DemoWorld, answer: str) -> bool:
    """Nothing changed, and the first count the answer states is the number of pending orders in zone south."""
    pending = sum(1 for o in world.list_orders("pending")["orders"] if o["zone"] == "south")
    first = _COUNT.search(answer)
    if first is None or world.count_effects() != 0:
        return False
    said = first.group(1).lower()
    return said == str(pending) or (pending < len(_NUMBER_WORDS) and said == _NUMBER_WORDS[pending])


def _setup_reassign(world: DemoWorld) -> None:
    world.assign_driver("d-north-1", "o-102")
    world.set_on_shift("d-north-1", False)


def _check_reassign(world: DemoWorld, answer: str) -> bool:
    order = world.order("o-102")
    return (
        order["status"] == "assigned"
        and order["driver_id"] in _on_shift_in(world, "north")
        and world.count_effects("unassign_driver", "o-102") == 1
        and world.count_effects("assign_driver", "o-102") == 2
    )


def _check_cancel(world: DemoWorld, answer: str) -> bool:
    others_untouched = all(o["status"] == "pending" for oid, o in world.orders().items() if oid != "o-301")
    return world.order("o-301")["status"] == "cancelled" and others_untouched and world.count_effects() == 1


def _check_fill_east(world: DemoWorld, answer: str) -> bool:
    east = [o for o in world.orders().values() if o["zone"] == "east"]
    on_shift = _on_shift_in(world, "east")
    return all(o["status"] == "assigned" and o["driver_id"] in on_shift for o in east) and world.count_effects() == len(
        east
    )


SYSTEM_PROMPT = (
    "You are the dispatcher of a delivery company. Complete the user's task with the tools, one step at a "
    "time, passing only the arguments a tool declares. Look things up before acting: an order tells you its "
    "zone and its customer. Each tool does one thing: a message to a customer is a send_message call of its own, "
    "to the customer's id. When a tool returns an "
    "error, read its message and suggestion and do what it says; never repeat a call that was just refused. "
    "When every part of the task is done, reply with one short sentence and no tool call."
)
"""The system prompt of the demo and the suite: the world's rules of thumb, in the words a small model follows."""


TASKS: tuple[DemoTask, ...] = (
    DemoTask(
        "assign-north",
        "Assign an available driver in zone north to order o-101 and message the customer that a driver is on the way.",
        _check_assign_north,
    ),
    DemoTask(
        "message-delay",
        "Tell the customer of order o-202 that their delivery is delayed by 30 minutes.",
        _check_message_delay,
    ),
    DemoTask(
        "count-pending-south",
        "How many orders are pending in zone south? Only look; do not change anything.",
        _check_pending_south,
    ),
    DemoTask(
        "reassign-off-shift",
        "Driver d-north-1 went off shift while holding order o-102. Move o-102 to another available driver "
        "in zone north.",
        _check_reassign,
        setup=_setup_reassign,
    ),
    DemoTask(
        "cancel-east",
        "The customer of order o-301 called to cancel it: cancel the order with the reason 'customer request'.",
        _check_cancel,
        needs_approval=True,
    ),
    DemoTask(
        "fill-east",
        "Assign every pending order in zone east to an available driver in zone east.",
        _check_fill_east,
    ),
)
"""The demo tasks, in a stable order."""


def demo_tasks() -> list[DemoTask]:
    """Return the demo tasks (a new list; the tasks themselves are immutable)."""
    return list(TASKS)
