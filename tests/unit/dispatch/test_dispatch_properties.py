"""Properties that hold for any input: bounding never exceeds its limit, keys ignore key order."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tooldispatch.dispatch import Dispatcher, ManualClock, Registry
from tooldispatch.dispatch.bounding import bound, marker
from tooldispatch.dispatch.idempotency import fingerprint, make_key

from .conftest import World, build_registry, no_sleep

TOOL = Registry().register("send", lambda **kw: kw, schema={"type": "object"}, read_only=False)


@given(st.text(max_size=3000), st.integers(min_value=200, max_value=2500))
def test_bounded_text_fits_and_keeps_both_ends(text: str, limit: int) -> None:
    """The result never exceeds the limit; when cut, it is head + exact marker + tail of the original."""
    out = bound(text, limit, "t")
    assert len(out.text) <= limit
    if out.omitted == 0:
        assert out.text == text
    else:
        mark = marker(out.omitted, "t")
        head, _, tail = out.text.partition(mark)
        assert text.startswith(head) and text.endswith(tail)
        assert len(head) + len(tail) + out.omitted == len(text)


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=6))
def test_keys_do_not_depend_on_argument_order(args: dict[str, object]) -> None:
    """The same arguments in reverse insertion order give the same key and fingerprint."""
    flipped = dict(reversed(list(args.items())))
    assert make_key("s", TOOL, args) == make_key("s", TOOL, flipped)
    assert fingerprint(args) == fingerprint(flipped)


_TEXT = st.text(st.characters(), max_size=8)  # unpaired surrogates included
_LEAF = st.none() | st.booleans() | st.integers() | st.floats() | _TEXT
_VALUES = st.recursive(
    _LEAF, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(_TEXT, kids, max_size=3), max_leaves=12
)
_ARGS = (
    st.dictionaries(st.sampled_from(["driver_id", "order_id", "to", "subject", "body"]) | _TEXT, _VALUES, max_size=4)
    | _VALUES
    | _VALUES.map(json.dumps)
)
_NAMES = st.sampled_from(["assign_driver", "refresh_drivers", "send_message", "cancel_order", "send_mesage"]) | _TEXT


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_NAMES, _ARGS), min_size=1, max_size=3))
def test_any_name_and_arguments_end_as_a_stored_result(calls: list[tuple[str, object]]) -> None:
    """Whatever a model sends, dispatch returns a result whose text encodes, and every trace can be stored."""
    world = World()
    d = Dispatcher(build_registry(world), store=":memory:", clock=ManualClock(), sleep=no_sleep, rand=lambda: 0.5)
    try:
        for name, args in calls:
            result = d.dispatch(name, args, session_id="s")
            result.content.encode("utf-8")
        d.flush()
        for trace in d.traces():
            json.dumps(trace.to_dict(), ensure_ascii=False).encode("utf-8")
    finally:
        d.close()


_RAISED = st.sampled_from([ValueError("x"), TypeError("a\ud800"), SystemExit(1), KeyboardInterrupt(), GeneratorExit()])
_RETURNED = _VALUES | st.sets(st.integers(), max_size=2) | st.binary(max_size=3)


@settings(max_examples=40, deadline=None)
@given(st.booleans(), st.booleans(), _RETURNED, _RAISED)
def test_any_tool_behaviour_ends_as_a_stored_result(
    is_async: bool, fails: bool, value: object, raised: BaseException
) -> None:
    """A tool returning anything or raising anything (sync or async) ends as a result; its trace is stored."""

    def sync_tool() -> object:
        if fails:
            raise raised
        return value

    async def async_tool() -> object:
        return sync_tool()

    reg = Registry()
    reg.register("t", async_tool if is_async else sync_tool, schema={"type": "object"}, read_only=True, max_attempts=1)
    d = Dispatcher(reg, store=":memory:")
    try:
        result = d.dispatch("t", {}, session_id="s")
        assert result.status in ("ok", "error")
        result.content.encode("utf-8")
        d.flush()
        (trace,) = d.traces()
        json.dumps(trace.to_dict(), ensure_ascii=False).encode("utf-8")
    finally:
        d.close()
