"""Run assign, unassign, assign on the demo world through the dispatcher and print what the model is told.

Usage: PYTHONPATH=src python scripts/replay-truth.py

One session on ``Dispatcher(build_registry(DemoWorld.seed()))``: refresh_drivers(north), assign_driver(d-north-1,
o-101), unassign_driver(d-north-1, o-101), refresh_drivers(north), assign_driver(d-north-1, o-101), get_order(o-101),
then rollback(). Each step prints the dispatcher's status and reason, the calls it ended (``supersedes``) and the
exact ``tool`` message content the agent sends the model (``agent.feedback.tool_answer``), then the order's state
in the world.
"""

from __future__ import annotations

import json
from typing import Any

from tooldispatch.agent.feedback import tool_answer
from tooldispatch.dispatch import Dispatcher, DispatchResult
from tooldispatch.tools.demo import DemoWorld, build_registry

PAIR = {"driver_id": "d-north-1", "order_id": "o-101"}
STEPS: list[tuple[str, dict[str, Any]]] = [
    ("refresh_drivers", {"zone": "north"}),
    ("assign_driver", PAIR),
    ("unassign_driver", PAIR),
    ("refresh_drivers", {"zone": "north"}),
    ("assign_driver", PAIR),
    ("get_order", {"order_id": "o-101"}),
]


def show(step: str, result: DispatchResult, world: DemoWorld, names: dict[str, str]) -> None:
    ended = [names.get(t, t) for t in result.trace.extra.get("supersedes", [])]
    print(f"{step}  ->  status={result.status} reason={result.reason}" + (f" ends={ended}" if ended else ""))
    print(f"    tool message: {tool_answer(result)}")
    order = world.order("o-101")
    print(f"    world: o-101 {order['status']}, driver {order['driver_id']}")


def main() -> None:
    world = DemoWorld.seed()
    names: dict[str, str] = {}
    with Dispatcher(build_registry(world)) as d:
        for i, (name, args) in enumerate(STEPS, 1):
            step = f"{i}. {name}({', '.join(f'{k}={v}' for k, v in args.items())})"
            result = d.dispatch(name, args, session_id="replay-truth")
            names[result.trace.id] = f"step {i}"
            show(step, result, world, names)
        results = d.rollback("replay-truth")
        print(f"{len(STEPS) + 1}. rollback()  ->  {len(results)} compensation(s)")
        for result in results:
            names[result.trace.id] = "the rollback"
            show(f"    {result.trace.tool}{json.dumps(dict(result.trace.params))}", result, world, names)
        print(
            "saga:",
            [(e.tool, e.state, names.get(e.compensation_trace_id or "", "-")) for e in d.saga("replay-truth")],
        )


if __name__ == "__main__":
    main()
