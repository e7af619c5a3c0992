"""A replay tells the truth: a stored result lasts only while no later call changed what its call acted on."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tooldispatch.dispatch import Dispatcher, ManualClock, Registry
from tooldispatch.dispatch.idempotency import IdempotencyStore
from tooldispatch.errors import RegistrationError, ToolError
from tooldispatch.store import open_store

ITEM = {
    "type": "object",
    "properties": {"item": {"type": "string"}},
    "required": ["item"],
    "additionalProperties": False,
}


class Shelf:
    """Items that can be held, released or destroyed; refusals say why, as a real service would (409)."""

    def __init__(self) -> None:
        self.state: dict[str, str] = {}
        self.calls: Counter[str] = Counter()

    def hold(self, item: str) -> dict[str, Any]:
        self.calls["hold"] += 1
        if self.state.get(item, "free") != "free":
            raise ToolError(f"{item} is {self.state[item]}, not free", retryable=False, status=409)
        self.state[item] = "held"
        return {"item": item, "state": "held"}

    def release(self, item: str) -> dict[str, Any]:
        self.calls["release"] += 1
        if self.state.get(item) != "held":
            raise ToolError(f"{item} is {self.state.get(item, 'free')}, not held", retryable=False, status=409)
        self.state[item] = "free"
        return {"item": item, "state": "free"}

    def destroy(self, item: str) -> dict[str, Any]:
        self.calls["destroy"] += 1
        self.state[item] = "destroyed"
        return {"item": item, "state": "destroyed"}


def shelf_registry(shelf: Shelf, *, declare: bool = False) -> Registry:
    """``hold`` compensated by ``release``; ``destroy`` on its own. ``declare``: all three act on ``item``."""
    acts: dict[str, Any] = {"acts_on": ["item"]} if declare else {}
    reg = Registry()
    reg.register("release", shelf.release, schema=ITEM, read_only=False, **acts)
    reg.register("hold", shelf.hold, schema=ITEM, read_only=False, compensate="release", **acts)
    reg.register("destroy", shelf.destroy, schema=ITEM, read_only=False, requires_approval=False, **acts)
    return reg


@pytest.fixture
def shelf() -> Shelf:
    return Shelf()


@pytest.fixture
def d(shelf: Shelf) -> Dispatcher:
    return Dispatcher(shelf_registry(shelf), clock=ManualClock(1_700_000_000.0))


def _call(d: Dispatcher, name: str, item: str = "x", session: str = "s") -> tuple[str, str | None, str]:
    r = d.dispatch(name, {"item": item}, session_id=session)
    return r.status, r.reason, r.content


HELD = '{"item": "x", "state": "held"}'
FREE = '{"item": "x", "state": "free"}'


def test_plain_repeat_still_replays(d: Dispatcher, shelf: Shelf) -> None:
    """With nothing in between, the same call is answered from the store and the tool runs once."""
    assert _call(d, "hold") == ("ok", None, HELD)
    assert _call(d, "hold") == ("ok", "idempotent_replay", HELD)
    assert (shelf.calls["hold"], shelf.state) == (1, {"x": "held"})


def test_call_undone_by_its_compensation_runs_again(d: Dispatcher, shelf: Shelf) -> None:
    """hold, release, hold: the third call runs (not replayed), and the world says held, as the answer does."""
    assert _call(d, "hold") == ("ok", None, HELD)
    undo = d.dispatch("release", {"item": "x"}, session_id="s")
    assert (undo.status, undo.reason, undo.content) == ("ok", None, FREE)
    first = d.traces(tool="hold")[0]
    assert undo.trace.extra["supersedes"] == [first.id]
    again = d.dispatch("hold", {"item": "x"}, session_id="s")
    assert (again.status, again.reason, again.content) == ("ok", None, HELD)
    assert (shelf.calls["hold"], shelf.state) == (2, {"x": "held"})
    assert again.trace.extra["supersedes"] == [undo.trace.id]


def test_undo_after_redo_runs_again(d: Dispatcher, shelf: Shelf) -> None:
    """hold, release, hold, release: the second release runs too (the redo ended the first one's record)."""
    for _ in range(2):
        assert _call(d, "hold")[:2] == ("ok", None)
        assert _call(d, "release")[:2] == ("ok", None)
    assert (shelf.calls["hold"], shelf.calls["release"], shelf.state) == (2, 2, {"x": "free"})


def test_direct_undo_ends_the_saga_entry(d: Dispatcher, shelf: Shelf) -> None:
    """A compensation called directly marks the entry compensated by that call: rollback has nothing to run."""
    _call(d, "hold")
    undo = d.dispatch("release", {"item": "x"}, session_id="s")
    assert d.rollback("s") == []
    assert [(e.state, e.compensation_trace_id) for e in d.saga("s")] == [("compensated", undo.trace.id)]
    assert (shelf.calls["release"], shelf.state) == (1, {"x": "free"})


def test_rollback_after_undo_and_redo_succeeds(d: Dispatcher, shelf: Shelf) -> None:
    """hold, release, hold, then rollback: the one effect that stands is undone, nothing fails."""
    _call(d, "hold")
    _call(d, "release")
    _call(d, "hold")
    results = d.rollback("s")
    assert [(r.trace.tool, r.status, r.content) for r in results] == [("release", "ok", FREE)]
    assert [e.state for e in d.saga("s")] == ["compensated", "compensated"]
    assert shelf.state == {"x": "free"}


def test_compensation_by_the_saga_lets_both_calls_run_again(d: Dispatcher, shelf: Shelf) -> None:
    """hold, release, hold, rollback, release: the saga's undo ended the redo, so the last release runs and
    the world's refusal reaches the caller instead of a stale "free" from the first release."""
    _call(d, "hold")
    _call(d, "release")
    _call(d, "hold")
    assert [r.status for r in d.rollback("s")] == ["ok"]
    status, reason, content = _call(d, "release")
    assert (status, reason) == ("error", "tool_error")
    assert "x is free, not held" in content
    assert _call(d, "hold") == ("ok", None, HELD)
    assert (shelf.calls["hold"], shelf.calls["release"], shelf.state) == (3, 3, {"x": "held"})


def test_undo_in_another_session_ends_the_record(d: Dispatcher, shelf: Shelf) -> None:
    """The world is shared: session b's release ends session a's hold, which then runs again, and a's
    rollback undoes only the hold that stands."""
    _call(d, "hold", session="a")
    assert _call(d, "release", session="b")[:2] == ("ok", None)
    assert _call(d, "hold", session="a") == ("ok", None, HELD)
    results = d.rollback("a")
    assert [(r.trace.tool, r.status) for r in results] == [("release", "ok")]
    assert [e.state for e in d.saga("a")] == ["compensated", "compensated"]
    assert shelf.state == {"x": "free"}


def test_other_items_are_untouched(d: Dispatcher, shelf: Shelf) -> None:
    """Releasing y leaves the stored hold of x in place: x's repeat is still a replay."""
    _call(d, "hold", "x")
    _call(d, "hold", "y")
    _call(d, "release", "y")
    assert _call(d, "hold", "x")[:2] == ("ok", "idempotent_replay")
    assert shelf.calls["hold"] == 2


def test_failed_undo_ends_nothing(d: Dispatcher, shelf: Shelf) -> None:
    """A refused release (the item is not held) leaves the hold's record and its saga entry as they were."""
    _call(d, "hold")
    shelf.state["x"] = "destroyed"  # changed outside the dispatcher
    assert _call(d, "release")[:2] == ("error", "tool_error")
    assert [e.state for e in d.saga("s")] == ["pending"]
    assert _call(d, "hold")[:2] == ("ok", "idempotent_replay")


def test_declared_acts_on_ends_records_of_other_tools(shelf: Shelf) -> None:
    """With acts_on declared, destroy between two holds ends the first: the second runs and the world's
    refusal is the answer, and the rollback skips the hold that destroy replaced."""
    d = Dispatcher(shelf_registry(shelf, declare=True), clock=ManualClock(1_700_000_000.0))
    _call(d, "hold")
    destroy = d.dispatch("destroy", {"item": "x"}, session_id="s")
    status, reason, content = _call(d, "hold")
    assert (status, reason) == ("error", "tool_error")
    assert "x is destroyed, not free" in content
    assert d.rollback("s") == []
    assert [(e.state, e.compensation_trace_id) for e in d.saga("s")] == [("superseded", destroy.trace.id)]
    assert (shelf.calls["hold"], shelf.calls["release"]) == (2, 0)


def test_undeclared_tools_end_nothing(d: Dispatcher, shelf: Shelf) -> None:
    """Without acts_on, the dispatcher cannot know destroy touched x: the hold's record stays (declare acts_on)."""
    _call(d, "hold")
    _call(d, "destroy")
    assert _call(d, "hold")[:2] == ("ok", "idempotent_replay")


def test_mismatch_rule_still_holds(shelf: Shelf) -> None:
    """The same key with other non-identifying arguments is still an idempotency_mismatch after an undo+redo."""
    schema = {
        "type": "object",
        "properties": {"item": {"type": "string"}, "note": {"type": "string"}},
        "required": ["item", "note"],
    }
    reg = Registry()
    reg.register("release", lambda item: shelf.release(item), schema=ITEM, read_only=False)
    reg.register(
        "hold",
        lambda item, note: shelf.hold(item),
        schema=schema,
        read_only=False,
        compensate="release",
        idempotency_fields=["item"],
    )
    d = Dispatcher(reg, clock=ManualClock(1_700_000_000.0))
    assert d.dispatch("hold", {"item": "x", "note": "a"}, session_id="s").ok
    assert d.dispatch("release", {"item": "x"}, session_id="s").ok
    assert d.dispatch("hold", {"item": "x", "note": "a"}, session_id="s").reason is None
    assert d.dispatch("hold", {"item": "x", "note": "b"}, session_id="s").reason == "idempotency_mismatch"


def test_supersede_leaves_in_flight_and_kept_records() -> None:
    """The store ends only completed records on the resource, never the kept one or one in flight."""
    idem = IdempotencyStore(open_store(":memory:"))
    for key in ("k1", "k2", "k3"):
        assert idem.claim(key, session_id="s", tool="t", fp="f", trace_id=f"t-{key}", now=0.0, ttl_s=60.0) is None
    idem.complete("k2", status="ok", reason=None, content="{}", resource="r")
    idem.complete("k3", status="ok", reason=None, content="{}", resource="r")
    assert idem.supersede("r", keep="k3") == ["t-k2"]
    assert [idem.lookup(k, 1.0) is not None for k in ("k1", "k2", "k3")] == [True, False, True]
    assert idem.supersede("r", keep=None) == ["t-k3"]
    assert idem.lookup("k1", 1.0) is not None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"read_only": True, "acts_on": ["item"]}, "a read-only tool changes nothing"),
        ({"read_only": False, "acts_on": []}, "acts_on is empty"),
        ({"read_only": False, "acts_on": ["colour"]}, "must be required parameters"),
    ],
)
def test_acts_on_is_checked_at_registration(options: dict[str, Any], message: str) -> None:
    """acts_on names required arguments of a side-effecting tool; anything else is refused with the fix."""
    with pytest.raises(RegistrationError, match=message):
        Registry().register("t", lambda item: item, schema=ITEM, **options)


def test_a_tool_and_its_inverse_declare_the_same_acts_on(shelf: Shelf) -> None:
    """An effect and its undoing act on the same thing: differing acts_on is refused when checked."""
    reg = Registry()
    reg.register("release", shelf.release, schema=ITEM, read_only=False)
    reg.register("hold", shelf.hold, schema=ITEM, read_only=False, compensate="release", acts_on=["item"])
    with pytest.raises(RegistrationError, match="declare the same acts_on on both"):
        Dispatcher(reg)
