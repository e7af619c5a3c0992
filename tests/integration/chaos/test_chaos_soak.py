"""A timed soak: agents on the demo world, their turns mixing normal calls with hanging, slow, crashing,
FIFO-reading and slow-dripping tools, all through one dispatcher with a store file.

It checks what must hold however the timing falls: no side effect happens twice, no call is recorded as
possibly run unless it started, the thread count stays bounded, and every run returns a record.

The length is ``TOOLDISPATCH_CHAOS_S`` seconds (8 by default, for CI); the full soak is
``TOOLDISPATCH_CHAOS_S=60 .venv/bin/python -m pytest -s tests/integration/chaos/test_chaos_soak.py``.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tooldispatch.agent import Agent, AgentRun, Budget
from tooldispatch.backends.base import ChatRequest
from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.dispatch import Dispatcher
from tooldispatch.tools.demo import DemoWorld, build_registry
from tooldispatch.tools.sandbox import Workspace
from tooldispatch.tools.web import Fetcher

pytestmark = pytest.mark.integration

SOAK_S = float(os.environ.get("TOOLDISPATCH_CHAOS_S", "8"))
AGENTS = 4
MAX_WORKERS = 48
TOOL_WORKERS = 4
HANG_S = 2.0  # hung tools end on their own after this, or when the test releases them
SEED = 20261201


class Drip(BaseHTTPRequestHandler):
    """Sends a 40-byte body one byte every 0.1 s."""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "40")
        self.end_headers()
        for _ in range(40):
            time.sleep(0.1)
            try:
                self.wfile.write(b"x")
                self.wfile.flush()
            except OSError:
                return

    def log_message(self, format: str, *args: object) -> None:
        return


class ChaosWorld:
    """Chaos tools over a demo world. Every invocation is noted in ``started`` before it does anything."""

    def __init__(self, world: DemoWorld, release: threading.Event) -> None:
        self.world = world
        self.release = release
        self.started: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def _start(self, tool: str, key: str) -> None:
        with self._lock:
            self.started.add((tool, key))

    def chaos_write(self, key: str) -> dict[str, Any]:
        """Write once.

        Args:
            key: what the effect is about.
        """
        self._start("chaos_write", key)
        self.world.record_effect("chaos_write", key)
        return {"written": key}

    def hang_write(self, key: str, effect_first: bool) -> dict[str, Any]:
        """Hang, writing before or after.

        Args:
            key: what the effect is about.
            effect_first: write before hanging.
        """
        self._start("hang_write", key)
        if effect_first:
            self.world.record_effect("hang_write", key)
        self.release.wait(HANG_S)
        if not effect_first:
            self.world.record_effect("hang_write", key)
        return {"written": key}

    def crash_write(self, key: str) -> dict[str, Any]:
        """Write, then crash.

        Args:
            key: what the effect is about.
        """
        self._start("crash_write", key)
        self.world.record_effect("crash_write", key)
        raise RuntimeError("lost the response")

    def slow_read(self, key: str, delay_ms: int) -> dict[str, Any]:
        """Answer after a delay.

        Args:
            key: what to read.
            delay_ms: how long to take.
        """
        self._start("slow_read", key)
        time.sleep(delay_ms / 1000)
        return {"key": key}

    def hang_read(self, key: str) -> dict[str, Any]:
        """Hang.

        Args:
            key: what to read.
        """
        self._start("hang_read", key)
        self.release.wait(HANG_S)
        return {"key": key}


@pytest.fixture
def drip_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Drip)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/drip"
    server.shutdown()
    server.server_close()


def _call(name: str, **args: Any) -> str:
    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


class Script:
    """A seeded model: a few turns of one to five random calls each, then an answer."""

    def __init__(self, rng: random.Random, tag: str, drip_url: str) -> None:
        self.rng = rng
        self.tag = tag
        self.drip_url = drip_url
        self.turns = 0
        self.keys = [f"{tag}-k{i}" for i in range(6)]  # few keys, so calls repeat (idempotent replays)

    def _one(self) -> str:
        rng, key = self.rng, self.rng.choice(self.keys)
        kind = rng.choice(
            ["list", "order", "message", "write", "write", "hang_write", "crash", "slow", "hang", "fifo", "drip"]
        )
        if kind == "list":
            return _call("list_drivers", zone=rng.choice(["north", "south"]))
        if kind == "order":
            return _call("get_order", order_id=rng.choice(["o-101", "o-201", "o-999"]))
        if kind == "message":
            return _call("send_message", to="c-101", subject=f"{key} update", body="on its way")
        if kind == "write":
            return _call("chaos_write", key=key)
        if kind == "hang_write":
            return _call("hang_write", key=f"{key}-{rng.randrange(3)}", effect_first=rng.random() < 0.5)
        if kind == "crash":
            return _call("crash_write", key=key)
        if kind == "slow":
            return _call("slow_read", key=key, delay_ms=rng.randrange(0, 200))
        if kind == "hang":
            return _call("hang_read", key=f"{key}-{rng.random():.6f}")
        if kind == "fifo":
            return _call("read_file", path="pipe")
        return _call("fetch_url", url=self.drip_url)

    def __call__(self, request: ChatRequest) -> ScriptedTurn:
        self.turns += 1
        if self.turns >= 4:
            return ScriptedTurn(content="All done.", chunk=64)
        return ScriptedTurn(content="".join(self._one() for _ in range(self.rng.randint(1, 5))), chunk=64)


def _registry(world: DemoWorld, chaos: ChaosWorld, workspace: Workspace, fetcher: Fetcher) -> Any:
    reg = build_registry(world)
    se = {"read_only": False}
    ro = {"read_only": True, "concurrency_safe": True}
    reg.register("chaos_write", chaos.chaos_write, timeout_s=0.5, **se)
    reg.register("hang_write", chaos.hang_write, timeout_s=0.1, **se)
    reg.register("crash_write", chaos.crash_write, **se)
    reg.register("slow_read", chaos.slow_read, timeout_s=0.1, **ro)
    reg.register("hang_read", chaos.hang_read, timeout_s=0.1, **ro)
    reg.register("read_file", workspace.read_file, timeout_s=0.5, **ro)
    reg.register("fetch_url", fetcher.fetch_url, timeout_s=fetcher.timeout_s + 1, **ro)
    return reg


def test_chaos_soak(tmp_path: Path, drip_url: str) -> None:
    """For TOOLDISPATCH_CHAOS_S seconds, 4 agents run seeded random turns on the demo world with misbehaving
    tools: no duplicate side effect, no call recorded as possibly run that never started, a bounded thread
    count, and a record for every run."""
    release = threading.Event()
    world = DemoWorld.seed(tmp_path / "world.db")
    chaos = ChaosWorld(world, release)
    ws_root = tmp_path / "ws"
    ws_root.mkdir()
    os.mkfifo(ws_root / "pipe")
    registry = _registry(world, chaos, Workspace(ws_root), Fetcher(allow_loopback=True, timeout_s=0.3))
    dispatcher = Dispatcher(registry, store=tmp_path / "state.db", max_workers=MAX_WORKERS, tool_workers=TOOL_WORKERS)
    base_threads = threading.active_count()
    peak = [base_threads]
    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.02):
            peak[0] = max(peak[0], threading.active_count())

    runs: list[AgentRun] = []
    failures: list[BaseException] = []
    end_at = time.monotonic() + SOAK_S

    def agent_loop(index: int) -> None:
        rng = random.Random(SEED + index)
        n = 0
        while time.monotonic() < end_at:
            n += 1
            tag = f"a{index}r{n}"
            agent = Agent(
                backend=ScriptedBackend(Script(rng, tag, drip_url)),
                dispatcher=dispatcher,
                budget=Budget(max_turns=6, max_wall_s=3.0),
                session_id=f"s-{tag}",
            )
            try:
                runs.append(agent.run("Keep the north zone moving."))
            except BaseException as exc:
                failures.append(exc)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    agents = [threading.Thread(target=agent_loop, args=(i,)) for i in range(AGENTS)]
    for thread in agents:
        thread.start()
    for thread in agents:
        thread.join(SOAK_S + 60)
    stop.set()
    watcher.join()
    release.set()

    assert failures == []
    assert all(not thread.is_alive() for thread in agents)
    assert runs and all(isinstance(run, AgentRun) for run in runs)
    # Bounded: the pools' threads, the agents, and per fetch in flight a watchdog and a server thread.
    assert peak[0] - base_threads <= MAX_WORKERS + AGENTS + 2 * TOOL_WORKERS + 4

    effects = Counter((e.tool, e.target, json.dumps(e.detail, sort_keys=True)) for e in world.audit())
    assert [key for key, n in effects.items() if n > 1] == []

    traces = dispatcher.traces()
    possibly_run = [t for t in traces if t.possibly_running]
    never_started = [
        t for t in possibly_run if (t.tool, str(t.params.get("key"))) not in chaos.started and t.tool in CHAOS_TOOLS
    ]
    assert never_started == []
    assert all(t.tool in CHAOS_TOOLS | {"read_file", "fetch_url"} for t in possibly_run)
    assert not any(t.possibly_running for t in traces if t.reason == "no_capacity")
    unknown = dispatcher.store.fetchall("SELECT trace_id FROM idempotency WHERE state != 'completed'")
    by_id = {t.id: t for t in traces}
    for (trace_id,) in unknown:
        trace = by_id[trace_id]
        assert (trace.tool, str(trace.params.get("key"))) in chaos.started

    reasons = Counter(t.reason or t.status for t in traces)
    print(
        f"\nchaos soak {SOAK_S:g} s: {len(runs)} runs ({Counter(r.end for r in runs)}), {len(traces)} calls "
        f"({dict(reasons)}), {sum(effects.values())} side effects, thread peak +{peak[0] - base_threads}"
    )
    dispatcher.close()


CHAOS_TOOLS = {"chaos_write", "hang_write", "crash_write", "slow_read", "hang_read"}
