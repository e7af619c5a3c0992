"""The intra-city logistics demo world of the Tool Dispatch pattern.

Drivers work in zones and hold up to three orders; availability must be refreshed before assigning;
unassigning is the saga inverse of assigning; messages go to an outbox with idempotency; cancelling an
order needs a human's approval. State lives in SQLite so that side effects can be counted exactly.

Example::

    from tooldispatch.dispatch import Dispatcher
    from tooldispatch.tools.demo import DemoWorld, build_registry

    world = DemoWorld.seed()
    d = Dispatcher(build_registry(world), store=":memory:")
    d.dispatch("refresh_drivers", {"zone": "north"}, session_id="s1")
    d.dispatch("assign_driver", {"driver_id": "d-north-1", "order_id": "o-101"}, session_id="s1")
"""

from tooldispatch.tools.demo._registry import SCHEMAS, WORLD_ENV, build_registry, registry_from_env
from tooldispatch.tools.demo._run import DemoOutcome, run_demo_task
from tooldispatch.tools.demo._tasks import SYSTEM_PROMPT, TASKS, DemoTask, demo_tasks
from tooldispatch.tools.demo._world import DEFAULT_ZONES, ORDER_STATUSES, AuditEntry, DemoWorld

__all__ = [
    "DEFAULT_ZONES",
    "ORDER_STATUSES",
    "SCHEMAS",
    "SYSTEM_PROMPT",
    "TASKS",
    "WORLD_ENV",
    "AuditEntry",
    "DemoOutcome",
    "DemoTask",
    "DemoWorld",
    "build_registry",
    "demo_tasks",
    "registry_from_env",
    "run_demo_task",
]
