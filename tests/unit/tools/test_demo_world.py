"""The logistics demo world: seeding, tools, business errors and the audit log."""

from __future__ import annotations

import pytest

from tooldispatch.errors import ConfigError, ToolError
from tooldispatch.tools.demo import TASKS, DemoWorld, demo_tasks


@pytest.fixture
def world() -> DemoWorld:
    return DemoWorld.seed(clock=lambda: 1000.0)


def test_seed_layout(world: DemoWorld) -> None:
    """Seeding makes three zones of three drivers (the last off shift) and three pending orders each."""
    north = world.list_drivers("north")
    assert north == {
        "zone": "north",
        "drivers": [
            {
                "id": "d-north-1",
                "zone": "north",
                "available": True,
                "on_shift": True,
                "assigned_orders": [],
                "capacity": 3,
            },
            {
                "id": "d-north-2",
                "zone": "north",
                "available": True,
                "on_shift": True,
                "assigned_orders": [],
                "capacity": 3,
            },
            {
                "id": "d-north-3",
                "zone": "north",
                "available": False,
                "on_shift": False,
                "assigned_orders": [],
                "capacity": 3,
            },
        ],
    }
    orders = world.list_orders()["orders"]
    assert [o["id"] for o in orders] == [
        "o-101",
        "o-102",
        "o-103",
        "o-201",
        "o-202",
        "o-203",
        "o-301",
        "o-302",
        "o-303",
    ]
    assert world.get_order("o-202") == {
        "id": "o-202",
        "zone": "south",
        "customer": "c-202",
        "status": "pending",
        "driver_id": None,
    }
    assert world.count_effects() == 0


def test_assign_and_unassign_are_audited(world: DemoWorld) -> None:
    """Assigning and unassigning change the order and each adds one audit entry."""
    assert world.assign_driver("d-north-1", "o-101") == {
        "order_id": "o-101",
        "driver_id": "d-north-1",
        "status": "assigned",
    }
    assert world.list_drivers("north")["drivers"][0]["assigned_orders"] == ["o-101"]
    assert world.unassign_driver("d-north-1", "o-101")["status"] == "pending"
    entries = world.audit()
    assert [(e.seq, e.tool, e.target, e.detail, e.at) for e in entries] == [
        (1, "assign_driver", "o-101", {"driver_id": "d-north-1", "order_id": "o-101"}, 1000.0),
        (2, "unassign_driver", "o-101", {"driver_id": "d-north-1", "order_id": "o-101"}, 1000.0),
    ]
    assert world.get_order("o-101")["driver_id"] is None


@pytest.mark.parametrize(
    ("driver", "order", "status", "message"),
    [
        ("d-north-9", "o-101", 404, "unknown driver 'd-north-9'; call list_drivers(zone) to see the drivers of a zone"),
        ("d-north-1", "o-999", 404, "unknown order 'o-999'; call list_orders() to see the existing orders"),
        ("d-north-3", "o-101", 409, "driver d-north-3 is off shift; call refresh_drivers and pick an available driver"),
        (
            "d-south-1",
            "o-101",
            409,
            "driver d-south-1 works in zone south but order o-101 is in zone north; pick a driver from "
            "list_drivers('north')",
        ),
    ],
)
def test_assign_business_errors(world: DemoWorld, driver: str, order: str, status: int, message: str) -> None:
    """Assigning an unknown, off-shift or out-of-zone driver raises a permanent ToolError saying what to do."""
    with pytest.raises(ToolError) as info:
        world.assign_driver(driver, order)
    assert str(info.value) == message
    assert info.value.status == status
    assert info.value.retryable is False
    assert world.count_effects() == 0


def test_assign_twice_is_a_conflict(world: DemoWorld) -> None:
    """An order already assigned cannot be assigned again, and nothing is recorded for the refusal."""
    world.assign_driver("d-north-1", "o-101")
    with pytest.raises(ToolError, match=r"^order o-101 is assigned to d-north-1, not pending; it cannot be assigned$"):
        world.assign_driver("d-north-2", "o-101")
    assert world.count_effects("assign_driver") == 1


def test_driver_busy_at_capacity() -> None:
    """A driver holding as many orders as their capacity is busy."""
    world = DemoWorld.seed(capacity=2)
    world.assign_driver("d-north-1", "o-101")
    world.assign_driver("d-north-1", "o-102")
    assert world.list_drivers("north")["drivers"][0]["available"] is False
    with pytest.raises(ToolError, match=r"^driver d-north-1 is busy with 2 orders \(capacity 2\); pick another"):
        world.assign_driver("d-north-1", "o-103")


def test_unassign_wrong_driver(world: DemoWorld) -> None:
    """Unassigning a driver who does not hold the order is refused."""
    world.assign_driver("d-north-1", "o-101")
    with pytest.raises(
        ToolError, match=r"^order o-101 is not assigned to d-north-2 \(status assigned, driver d-north-1\)"
    ):
        world.unassign_driver("d-north-2", "o-101")


def test_send_message_outbox_and_audit(world: DemoWorld) -> None:
    """A message lands in the outbox and the audit log records its identifying fields."""
    assert world.send_message("c-101", "On the way", "A driver is coming.") == {
        "message_id": 1,
        "to": "c-101",
        "subject": "On the way",
    }
    assert world.outbox() == [{"id": 1, "to": "c-101", "subject": "On the way", "body": "A driver is coming."}]
    assert [(e.tool, e.target, e.detail) for e in world.audit()] == [
        ("send_message", "c-101", {"subject": "On the way", "to": "c-101"})
    ]


def test_send_message_empty_recipient(world: DemoWorld) -> None:
    """An empty recipient is refused before anything is written."""
    with pytest.raises(ToolError, match=r"^the recipient 'to' is empty"):
        world.send_message("  ", "s", "b")
    assert world.outbox() == []


def test_cancel_order_releases_driver(world: DemoWorld) -> None:
    """Cancelling an assigned order frees its driver; cancelling it again is a conflict."""
    world.assign_driver("d-east-1", "o-301")
    assert world.cancel_order("o-301", "customer request") == {
        "order_id": "o-301",
        "status": "cancelled",
        "reason": "customer request",
    }
    assert world.get_order("o-301")["driver_id"] is None
    assert world.list_drivers("east")["drivers"][0]["assigned_orders"] == []
    with pytest.raises(ToolError, match=r"^order o-301 is already cancelled; nothing to cancel$"):
        world.cancel_order("o-301", "again")
    assert world.count_effects("cancel_order") == 1


def test_list_orders_filter_and_bad_status(world: DemoWorld) -> None:
    """Orders filter by status; an unknown status lists the allowed ones."""
    world.assign_driver("d-south-1", "o-201")
    assert [o["id"] for o in world.list_orders("assigned")["orders"]] == ["o-201"]
    with pytest.raises(ToolError) as info:
        world.list_orders("lost")
    assert (
        str(info.value) == "unknown order status 'lost'; use one of pending, assigned, cancelled, delivered or omit it"
    )
    assert info.value.status == 422


def test_unknown_zone(world: DemoWorld) -> None:
    """Listing drivers of an unknown zone names the known zones."""
    with pytest.raises(ToolError, match=r"^unknown zone 'west'; known zones: east, north, south$"):
        world.list_drivers("west")


def test_refresh_reports_observation_time(world: DemoWorld) -> None:
    """refresh_drivers returns the same drivers as list_drivers plus when they were observed."""
    refreshed = world.refresh_drivers("south")
    assert refreshed["observed_at"] == 1000.0
    assert refreshed["drivers"] == world.list_drivers("south")["drivers"]
    assert world.count_effects() == 0


def test_record_effect_counts(world: DemoWorld) -> None:
    """Effects recorded by outside tools are counted per tool and per target."""
    assert world.record_effect("charge", "card-1", {"amount": 5}) == 1
    assert world.record_effect("charge", "card-2") == 2
    assert world.count_effects("charge") == 2
    assert world.count_effects("charge", "card-1") == 1


def test_failed_write_rolls_back(world: DemoWorld) -> None:
    """A business error inside a write leaves neither the change nor an audit entry behind."""
    world.set_on_shift("d-north-1", False)
    with pytest.raises(ToolError):
        world.assign_driver("d-north-1", "o-101")
    assert world.get_order("o-101")["status"] == "pending"
    assert world.audit() == []


def test_tasks_are_unique_and_fail_on_fresh_world() -> None:
    """Every task has a unique id and its check is False before the agent does anything."""
    assert [t.id for t in demo_tasks()] == [t.id for t in TASKS]
    assert len({t.id for t in TASKS}) == len(TASKS)
    for task in TASKS:
        world = DemoWorld.seed()
        if task.setup is not None:
            task.setup(world)
        assert task.check(world, "") is False, task.id


def test_task_checks_pass_when_done() -> None:
    """Doing what each task asks, with the world's tools, makes its check pass."""
    by_id = {t.id: t for t in TASKS}
    w = DemoWorld.seed()
    w.assign_driver("d-north-2", "o-101")
    w.send_message("c-101", "Driver assigned", "d-north-2 is on the way")
    assert by_id["assign-north"].check(w, "") is True

    w = DemoWorld.seed()
    w.send_message("c-202", "Delay", "Your delivery is 30 minutes late")
    assert by_id["message-delay"].check(w, "") is True

    w = DemoWorld.seed()
    reassign = by_id["reassign-off-shift"]
    assert reassign.setup is not None
    reassign.setup(w)
    w.unassign_driver("d-north-1", "o-102")
    w.assign_driver("d-north-2", "o-102")
    assert reassign.check(w, "") is True

    w = DemoWorld.seed()
    w.cancel_order("o-301", "customer request")
    assert by_id["cancel-east"].check(w, "") is True
    assert by_id["cancel-east"].needs_approval is True

    w = DemoWorld.seed()
    for order in ("o-301", "o-302", "o-303"):
        w.assign_driver("d-east-1", order)
    assert by_id["fill-east"].check(w, "") is True


def test_question_task_checks_the_answer_and_that_nothing_changed() -> None:
    """The read-only question passes only with the right count first in the answer and no side effect."""
    task = next(t for t in TASKS if t.id == "count-pending-south")
    w = DemoWorld.seed()
    verdicts = [
        task.check(w, answer)
        for answer in (
            "There are 3 pending orders in zone south.",
            "Three: o-201, o-202 and o-203.",
            "o-201, o-202 and o-203 are pending, so 3.",
            "There are 4.",
            "I could not tell.",
            "",
        )
    ]
    assert verdicts == [True, True, True, False, False, False]
    w.send_message("c-201", "Hello", "Checking on your order")
    assert task.check(w, "There are 3.") is False


def test_task_check_rejects_extra_side_effects() -> None:
    """A task done with an extra, unrequested side effect does not pass."""
    task = next(t for t in TASKS if t.id == "message-delay")
    w = DemoWorld.seed()
    w.send_message("c-202", "Delay", "30 minutes late")
    w.assign_driver("d-south-1", "o-202")
    assert task.check(w, "") is False


@pytest.mark.parametrize(
    "kwargs",
    [{"zones": ("north", "north")}, {"zones": ()}, {"orders_per_zone": 100}, {"drivers_per_zone": 0}, {"capacity": 0}],
)
def test_seed_rejects_bad_layout(kwargs: dict[str, object]) -> None:
    """Repeated zones and out-of-range counts are configuration errors."""
    with pytest.raises(ConfigError):
        DemoWorld.seed(**kwargs)  # type: ignore[arg-type]
