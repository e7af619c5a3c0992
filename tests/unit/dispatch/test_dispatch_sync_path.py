"""The sync API waits for sync tools on its own thread: the same outcomes as the loop path, taken only when safe."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tooldispatch.dispatch import Dispatcher, DispatchResult, ManualClock, Registry
from tooldispatch.dispatch.executor import WorkerThreads
from tooldispatch.errors import ToolError

from .conftest import no_sleep

EMPTY = {"type": "object", "properties": {}}
TAG = {"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]}
TEXT = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
ITEM = {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}

# ok, ok after a retry, timeout, exception, ok then idempotent replay, side-effecting timeout then conflict,
# unknown tool, invalid arguments.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("echo", {"text": "hi"}),
    ("flaky", {}),
    ("hang", {}),
    ("boom", {}),
    ("send", {"to": "ana"}),
    ("send", {"to": "ana"}),
    ("charge", {"amount": 5}),
    ("charge", {"amount": 5}),
    ("nope", {}),
    ("echo", {}),
]


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """An event that hanging tools wait on, set at the end so that no test leaves a thread blocked."""
    event = threading.Event()
    yield event
    event.set()


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """How each sync tool attempt was waited for: ``direct`` (on the dispatching thread) or ``loop``."""
    seen: list[str] = []
    call, submit = WorkerThreads.call, WorkerThreads.submit

    def direct(self: WorkerThreads, *args: Any, **kwargs: Any) -> Any:
        seen.append("direct")
        return call(self, *args, **kwargs)

    def through_loop(self: WorkerThreads, *args: Any, **kwargs: Any) -> Any:
        seen.append("loop")
        return submit(self, *args, **kwargs)

    monkeypatch.setattr(WorkerThreads, "call", direct)
    monkeypatch.setattr(WorkerThreads, "submit", through_loop)
    return seen


def build(release: threading.Event) -> Dispatcher:
    """A dispatcher whose tools cover every outcome, with fresh state and a manual clock."""
    flaked: list[int] = []

    def echo(text: str) -> dict[str, str]:
        return {"text": text}

    def flaky() -> dict[str, int]:
        flaked.append(1)
        if len(flaked) == 1:
            raise ToolError("503", status=503)
        return {"ok": 1}

    def boom() -> dict[str, int]:
        raise ValueError("no")

    def send(to: str) -> dict[str, str]:
        return {"sent": to}

    def charge(amount: int) -> dict[str, int]:
        release.wait(30)
        return {"charged": amount}

    reg = Registry()
    reg.register("echo", echo, read_only=True)
    reg.register("flaky", flaky, schema=EMPTY, read_only=True, max_attempts=2)
    reg.register("hang", lambda: release.wait(30), schema=EMPTY, read_only=True, timeout_s=0.05, max_attempts=1)
    reg.register("boom", boom, read_only=True, max_attempts=1)
    reg.register("send", send, read_only=False)
    reg.register("charge", charge, read_only=False, timeout_s=0.05, max_attempts=3)
    return Dispatcher(reg, clock=ManualClock(), sleep=no_sleep, rand=lambda: 0.5)


def comparable(results: list[DispatchResult]) -> list[dict[str, Any]]:
    """Results without what differs by construction: trace ids, replaced by the position of their call."""
    ids = {r.trace.id: f"<call {i}>" for i, r in enumerate(results)}

    def renamed(text: str) -> str:
        for trace_id, position in ids.items():
            text = text.replace(trace_id, position)
        return text

    out = []
    for r in results:
        trace = r.trace.to_dict()
        del trace["id"]
        trace["message"] = renamed(trace["message"] or "")
        trace["extra"] = json.loads(renamed(json.dumps(trace["extra"])))
        out.append(
            {"status": r.status, "reason": r.reason, "content": renamed(r.content), "value": r.value, "trace": trace}
        )
    return out


def test_sync_and_async_paths_give_the_same_results(release: threading.Event, waits: list[str]) -> None:
    """dispatch() and adispatch() agree on status, reason, content and trace for every outcome in CALLS."""

    async def run_all(d: Dispatcher) -> list[DispatchResult]:
        return [await d.adispatch(name, args, session_id="s") for name, args in CALLS]

    with build(release) as sync_d, build(release) as async_d:
        sync_results = [sync_d.dispatch(name, args, session_id="s") for name, args in CALLS]
        sync_waits = list(waits)
        waits.clear()
        async_results = asyncio.run(run_all(async_d))
    assert comparable(sync_results) == comparable(async_results)
    assert [(r.status, r.reason) for r in sync_results] == [
        ("ok", None),
        ("ok", None),
        ("error", "timeout"),
        ("error", "exception"),
        ("ok", None),
        ("ok", "idempotent_replay"),
        ("error", "timeout"),
        ("rejected", "idempotency_conflict"),
        ("rejected", "tool_hallucination"),
        ("rejected", "validation"),
    ]
    assert (sync_waits, waits) == (["direct"] * 7, ["loop"] * 7)


def test_direct_wait_timeout_is_possibly_running_and_the_tool_goes_on(release: threading.Event) -> None:
    """A sync tool timed out on the direct path is recorded as possibly running and keeps running to its end."""
    finished = threading.Event()

    def hang() -> dict[str, int]:
        release.wait(30)
        finished.set()
        return {}

    reg = Registry()
    reg.register("hang", hang, read_only=True, timeout_s=0.05, max_attempts=1)
    with Dispatcher(reg) as d:
        r = d.dispatch("hang", {})
        assert (r.status, r.reason, r.trace.possibly_running) == ("error", "timeout", True)
        assert not finished.is_set()
        release.set()
        assert finished.wait(5)


def test_call_after_a_hung_one_gets_another_thread(release: threading.Event) -> None:
    """On the direct path a call made while an earlier tool still hangs runs at once on another thread."""
    threads: list[int] = []

    def hang() -> dict[str, int]:
        threads.append(threading.get_ident())
        release.wait(30)
        return {}

    def ping() -> dict[str, str]:
        threads.append(threading.get_ident())
        return {"pong": "yes"}

    reg = Registry()
    reg.register("hang", hang, read_only=True, timeout_s=0.05, max_attempts=1)
    reg.register("ping", ping, read_only=True, timeout_s=5)
    with Dispatcher(reg) as d:
        assert d.dispatch("hang", {}).reason == "timeout"
        assert d.dispatch("ping", {}).content == '{"pong": "yes"}'
    assert len(set(threads)) == 2


def test_back_to_back_calls_reuse_one_worker_thread() -> None:
    """Consecutive sync calls from one thread run on a single worker thread, never starting a second."""
    idents: set[int] = set()

    def where() -> dict[str, int]:
        idents.add(threading.get_ident())
        return {}

    reg = Registry()
    reg.register("where", where, read_only=True)
    with Dispatcher(reg) as d:
        for _ in range(50):
            assert d.dispatch("where", {}).ok
    assert len(idents) == 1


def test_dispatch_many_waits_directly_only_for_calls_on_their_own(waits: list[str]) -> None:
    """In dispatch_many a sequential call is waited for directly; a parallel batch goes through the loop."""
    reg = Registry()
    reg.register("read", lambda tag: {"tag": tag}, schema=TAG, read_only=True, concurrency_safe=True)
    reg.register("write", lambda tag: {"tag": tag}, schema=TAG, read_only=False)
    with Dispatcher(reg) as d:
        results = d.dispatch_many(
            [("write", {"tag": "a"}), ("read", {"tag": "b"}), ("read", {"tag": "c"}), ("write", {"tag": "d"})]
        )
    assert [r.content for r in results] == ['{"tag": "a"}', '{"tag": "b"}', '{"tag": "c"}', '{"tag": "d"}']
    assert waits == ["direct", "loop", "loop", "direct"]


async def test_adispatch_in_a_callers_loop_never_blocks_it(waits: list[str]) -> None:
    """adispatch from a caller's loop waits through the loop, so the loop keeps running during the tool."""
    started = threading.Event()
    proceed = threading.Event()

    def slow() -> dict[str, int]:
        started.set()
        if not proceed.wait(5):
            raise RuntimeError("the loop did not run while the tool waited")
        return {}

    async def meanwhile() -> str:
        await asyncio.to_thread(started.wait, 5)
        proceed.set()
        return "loop ran"

    reg = Registry()
    reg.register("slow", slow, read_only=True)
    with Dispatcher(reg) as d:
        result, note = await asyncio.gather(d.adispatch("slow", {}), meanwhile())
    assert (result.ok, note, waits) == (True, "loop ran", ["loop"])


@pytest.mark.parametrize("use_async", [False, True])
def test_tool_parameters_named_like_the_executors_own_pass_through(use_async: bool) -> None:
    """A sync tool whose parameters are called fn, loop and deadline gets them on either path."""

    def named(fn: str, loop: str, deadline: str) -> dict[str, str]:
        return {"fn": fn, "loop": loop, "deadline": deadline}

    reg = Registry()
    reg.register("named", named, read_only=True)
    args = {"fn": "a", "loop": "b", "deadline": "c"}
    with Dispatcher(reg) as d:
        r = asyncio.run(d.adispatch("named", args)) if use_async else d.dispatch("named", args)
    assert json.loads(r.content) == args


@pytest.mark.parametrize("timeout_s", [1e12, float("inf")])
def test_direct_wait_accepts_timeouts_beyond_the_lock_limit(timeout_s: float) -> None:
    """A timeout longer than a thread lock can wait (or infinite) still runs the tool to its result."""
    reg = Registry()
    reg.register("echo", lambda text: {"text": text}, schema=TEXT, read_only=True, timeout_s=timeout_s)
    with Dispatcher(reg) as d:
        assert d.dispatch("echo", {"text": "x"}).content == '{"text": "x"}'


def test_rollback_and_approve_wait_directly(waits: list[str]) -> None:
    """approve() and rollback() run their sync tools through the direct wait, like dispatch()."""
    reg = Registry()
    reg.register("undo", lambda item: {"undone": item}, schema=ITEM, read_only=False)
    reg.register("take", lambda item: {"took": item}, schema=ITEM, read_only=False, destructive=True, compensate="undo")
    reg.register("ask", lambda item: {"asked": item}, schema=ITEM, read_only=False, requires_approval=True)
    with Dispatcher(reg) as d:
        assert d.dispatch("take", {"item": "a"}, session_id="s").ok
        assert [r.content for r in d.rollback("s")] == ['{"undone": "a"}']
        pending = d.dispatch("ask", {"item": "b"}, session_id="s")
        assert pending.approval_id is not None
        assert d.approve(pending.approval_id).content == '{"asked": "b"}'
    assert waits == ["direct", "direct", "direct"]


def test_with_a_tool_loop_the_sync_api_runs_async_tools_on_that_loop() -> None:
    """Given ``tool_loop`` (an MCP supervisor's), a sync call runs on it, and falls back when it is stopped."""
    home = asyncio.new_event_loop()
    thread = threading.Thread(target=home.run_forever, daemon=True)
    thread.start()
    seen: list[asyncio.AbstractEventLoop] = []

    async def where(tag: str) -> dict[str, str]:
        seen.append(asyncio.get_running_loop())
        return {"tag": tag}

    reg = Registry()
    reg.register("where", where, schema=TAG, read_only=True)
    d = Dispatcher(reg, tool_loop=home)
    try:
        first = d.dispatch("where", {"tag": "a"})
        home.call_soon_threadsafe(home.stop)
        thread.join(5)
        second = d.dispatch("where", {"tag": "b"})
    finally:
        d.close()
        home.close()
    assert [first.status, second.status] == ["ok", "ok"]
    assert [json.loads(first.content), json.loads(second.content)] == [{"tag": "a"}, {"tag": "b"}]
    assert seen[0] is home
    assert seen[1] is not home
