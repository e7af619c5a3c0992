"""``tooldispatch bench dispatch``: what the dispatch layer costs, measured against a bare function call.

Three measurements, taken side by side in one run so that the ratios hold on any machine:

1. a no-op read-only tool: bare call vs ``Dispatcher.dispatch`` (admission, validation, timer, trace);
2. a no-op side-effecting tool whose idempotency record is made durable in a SQLite file before the
   tool runs (every call has fresh arguments, so every call writes a new record);
3. throughput with N concurrent sessions (threads), each dispatching the side-effecting tool.

Each single-call figure is the median and 95th percentile of individually timed calls after a warm-up.
"""

from __future__ import annotations

import platform
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tooldispatch.dispatch import Dispatcher, Registry
from tooldispatch.dispatch.executor import WorkerThreads

READ_ONLY_TARGET_US = 100.0
SIDE_EFFECT_TARGET_US = 2000.0


@dataclass(frozen=True, slots=True)
class Timing:
    """Per-call times of one variant, in microseconds.

    Attributes:
        name: what was called.
        n: how many timed calls.
        median_us: the median.
        p95_us: the 95th percentile.
    """

    name: str
    n: int
    median_us: float
    p95_us: float


@dataclass(frozen=True, slots=True)
class Overhead:
    """A dispatched variant next to the bare call it wraps.

    Attributes:
        bare: the plain function call.
        dispatched: the same function through the dispatcher.
        target_us: the target for the median overhead.
    """

    bare: Timing
    dispatched: Timing
    target_us: float

    @property
    def median_overhead_us(self) -> float:
        """Dispatched median minus bare median."""
        return self.dispatched.median_us - self.bare.median_us

    @property
    def p95_overhead_us(self) -> float:
        """Dispatched p95 minus bare p95."""
        return self.dispatched.p95_us - self.bare.p95_us

    @property
    def meets_target(self) -> bool:
        """Whether the median overhead is within the target."""
        return self.median_overhead_us <= self.target_us


@dataclass(frozen=True, slots=True)
class Throughput:
    """Calls per second with several sessions dispatching at once.

    Attributes:
        sessions: concurrent sessions (one thread each).
        calls: calls made in total.
        bare_calls_per_s: the bare function called from the same threads.
        dispatched_calls_per_s: the side-effecting tool through the dispatcher.
        one_session_calls_per_s: the same number of dispatched calls made by one session alone, for scale.
    """

    sessions: int
    calls: int
    bare_calls_per_s: float
    dispatched_calls_per_s: float
    one_session_calls_per_s: float


@dataclass(frozen=True, slots=True)
class DispatchBench:
    """Everything ``bench dispatch`` measured.

    Attributes:
        read_only: the no-op read-only tool.
        side_effecting: the no-op side-effecting tool with a durable idempotency record.
        throughput: concurrent sessions.
        thread_hop: the bare no-op run in one of the dispatcher's worker threads and waited for the way
            ``Dispatcher.dispatch`` waits (``WorkerThreads.call``): the floor under any sync dispatch of a sync
            tool, which runs in a worker thread so its timer can fire.
        pool_hop: the same no-op through ``concurrent.futures`` (``submit(...).result()`` on a one-thread
            pool), for scale.
        store: what backed the dispatcher (``temp file`` for all variants).
        python: the interpreter version.
    """

    read_only: Overhead
    side_effecting: Overhead
    throughput: Throughput
    thread_hop: Timing
    pool_hop: Timing
    store: str
    python: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serializable form, with the derived overheads and verdicts."""
        out: dict[str, Any] = {"store": self.store, "python": self.python}
        for key in ("read_only", "side_effecting"):
            o: Overhead = getattr(self, key)
            out[key] = {
                "bare": asdict(o.bare),
                "dispatched": asdict(o.dispatched),
                "median_overhead_us": round(o.median_overhead_us, 2),
                "p95_overhead_us": round(o.p95_overhead_us, 2),
                "target_us": o.target_us,
                "meets_target": o.meets_target,
            }
        out["throughput"] = asdict(self.throughput)
        out["thread_hop"] = asdict(self.thread_hop)
        out["pool_hop"] = asdict(self.pool_hop)
        return out


def noop() -> dict[str, Any]:
    """Do nothing and return an empty object."""
    return {}


def record(item: int) -> dict[str, Any]:
    """Pretend to write ``item`` somewhere and return it.

    Args:
        item: a sequence number.
    """
    return {"item": item}


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def _time_calls(name: str, call: Callable[[int], object], n: int, warmup: int) -> Timing:
    for i in range(warmup):
        call(-1 - i)
    clock = time.perf_counter_ns
    samples: list[float] = []
    for i in range(n):
        start = clock()
        call(i)
        samples.append((clock() - start) / 1000.0)
    samples.sort()
    return Timing(name, n, round(statistics.median(samples), 3), round(_percentile(samples, 0.95), 3))


def _registry() -> Registry:
    reg = Registry()
    reg.register("noop", noop, read_only=True, concurrency_safe=True, source="bench", version="1")
    reg.register("record", record, read_only=False, destructive=False, source="bench", version="1")
    return reg


def _expect_ok(result: Any, what: str) -> None:
    if result.status != "ok":
        raise RuntimeError(f"bench {what} call did not succeed: {result.status} {result.reason}: {result.content}")


def _run_threads(sessions: int, calls_per_session: int, work: Callable[[int, int], object]) -> float:
    """Run ``work(session, i)`` from one thread per session, all released at once; returns calls/s."""
    barrier = threading.Barrier(sessions + 1)

    def worker(s: int) -> None:
        barrier.wait()
        for i in range(calls_per_session):
            work(s, i)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(sessions)]
    for t in threads:
        t.start()
    barrier.wait()
    start = time.perf_counter()
    for t in threads:
        t.join()
    return sessions * calls_per_session / (time.perf_counter() - start)


def _throughput(dispatcher: Dispatcher, sessions: int, calls_per_session: int) -> Throughput:
    def dispatched(prefix: str) -> Callable[[int, int], None]:
        def work(s: int, i: int) -> None:
            _expect_ok(dispatcher.dispatch("record", {"item": i}, session_id=f"{prefix}-{s}"), "throughput")

        return work

    calls = sessions * calls_per_session
    bare = _run_threads(sessions, calls_per_session, lambda s, i: record(i))
    through = _run_threads(sessions, calls_per_session, dispatched("tp"))
    alone = _run_threads(1, calls, dispatched("tp1"))
    return Throughput(sessions, calls, round(bare, 1), round(through, 1), round(alone, 1))


def run_dispatch_bench(
    *, iterations: int = 3000, side_effect_iterations: int = 1000, sessions: int = 8, calls_per_session: int = 200
) -> DispatchBench:
    """Measure the dispatch overhead and throughput (see the module docstring).

    Args:
        iterations: timed calls for the read-only variant (and its bare call).
        side_effect_iterations: timed calls for the side-effecting variant.
        sessions: concurrent sessions for the throughput measurement.
        calls_per_session: calls each session makes.

    Returns:
        The measurements.
    """
    with tempfile.TemporaryDirectory(prefix="tooldispatch-bench-") as tmp:
        dispatcher = Dispatcher(_registry(), store=str(Path(tmp) / "state.db"))
        try:
            warm = max(50, iterations // 10)
            bare_ro = _time_calls("bare noop()", lambda i: noop(), iterations, warm)

            def ro(i: int) -> None:
                _expect_ok(dispatcher.dispatch("noop", {}, session_id="bench-ro"), "read-only")

            disp_ro = _time_calls("dispatch noop (read-only)", ro, iterations, warm)
            workers = WorkerThreads(max_workers=1)
            try:
                hop = _time_calls(
                    "noop() in a worker thread", lambda i: workers.call(30.0, 30.0, noop), iterations, warm
                )
            finally:
                workers.close()
            with ThreadPoolExecutor(max_workers=1) as pool:
                pool_hop = _time_calls(
                    "noop() in a concurrent.futures thread", lambda i: pool.submit(noop).result(), iterations, warm
                )

            warm_se = max(20, side_effect_iterations // 10)
            bare_se = _time_calls("bare record()", record, side_effect_iterations, warm_se)

            def se(i: int) -> None:
                _expect_ok(dispatcher.dispatch("record", {"item": i}, session_id="bench-se"), "side-effecting")

            disp_se = _time_calls("dispatch record (idempotent, SQLite file)", se, side_effect_iterations, warm_se)
            throughput = _throughput(dispatcher, sessions, calls_per_session)
        finally:
            close = getattr(dispatcher, "close", None)
            if callable(close):
                close()
    return DispatchBench(
        read_only=Overhead(bare_ro, disp_ro, READ_ONLY_TARGET_US),
        side_effecting=Overhead(bare_se, disp_se, SIDE_EFFECT_TARGET_US),
        throughput=throughput,
        thread_hop=hop,
        pool_hop=pool_hop,
        store="SQLite file (WAL, synchronous=NORMAL) in a temp folder",
        python=platform.python_version(),
    )


MCP_TARGET_US = 500.0


@dataclass(frozen=True, slots=True)
class McpPath:
    """One place an MCP call is made from: the SDK's own call next to the dispatched call, timed two ways.

    Attributes:
        wall: whole calls, SDK against dispatched. Their difference of medians is the overhead as a caller sees it,
            but each call's time is mostly the server's (milliseconds, and noisy on a loaded machine), so that
            difference moves by hundreds of microseconds from run to run.
        outside: the same calls, each less the time of the SDK's ``call_tool`` made inside it (the request, the
            server's work and the reply): what is left is the caller's side alone (for the SDK variant, the timing
            itself and, from a thread, the hop onto the connection's loop and back; for the dispatched variant,
            the same plus the dispatch layer). Their difference of medians is the dispatch layer's cost with the
            server's time taken out call by call; the target is judged on it.
    """

    wall: Overhead
    outside: Overhead

    @property
    def meets_target(self) -> bool:
        """Whether the dispatch layer's cost (outside the SDK call) is within the target."""
        return self.outside.meets_target


@dataclass(frozen=True, slots=True)
class McpOverhead:
    """The MCP row: an MCP call through the dispatcher next to the SDK's direct call, from the same place.

    Attributes:
        in_loop: ``await Dispatcher.adispatch`` on the loop that owns the connection (as the gateway runs it),
            next to ``Client.call_tool`` awaited there: the dispatch layer alone.
        sync: ``Dispatcher.dispatch`` from another thread (as the agent and scripts call it), next to the SDK's
            call made from that same thread (``call_tool`` submitted to the connection's loop and waited for):
            both pay the hop onto the connection's loop and back, so the difference is the dispatch layer.
    """

    in_loop: McpPath
    sync: McpPath


def run_mcp_overhead(*, iterations: int = 400, block: int = 10) -> McpOverhead:
    """What the dispatch layer adds over a direct MCP SDK call, on ``mcp-server-time`` over stdio.

    The direct call is ``Client.call_tool`` on the connection's client. The four variants run in alternating
    blocks of ``block`` calls, so all see the same machine. Every ``call_tool`` (direct, or made by the dispatched
    call) is timed where it is awaited, so each call's time outside it is known (``McpPath.outside``). The tool is
    trusted read-only, as the server annotates it.

    Raises:
        ConfigError: mcp-server-time is not installed.
    """
    import importlib.util
    import sys

    from tooldispatch.errors import ConfigError

    if importlib.util.find_spec("mcp_server_time") is None:
        raise ConfigError("the MCP row needs mcp-server-time: pip install -e '.[dev]'")
    from tooldispatch.mcp.config import parse_config
    from tooldispatch.mcp.source import McpServers
    from tooldispatch.store import Store

    args = {"timezone": "UTC"}
    config = {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}
    servers = parse_config({"mcpServers": {"time": {**config, "trust": "annotations"}}}, origin="bench")
    variants = ("sdk", "in_loop", "sdk_thread", "sync")
    wall: dict[str, list[float]] = {v: [] for v in variants}
    outside: dict[str, list[float]] = {v: [] for v in variants}
    inner: list[float] = []  # the SDK's call_tool times, in the order they ended
    clock = time.perf_counter_ns
    with tempfile.TemporaryDirectory(prefix="tooldispatch-bench-mcp-") as tmp:
        store = Store(Path(tmp) / "state.db")
        with McpServers(servers, store=store, log_dir=tmp) as mcp:
            connection = mcp.servers["time"].connection
            dispatcher = Dispatcher(mcp.servers["time"].registry, store=store, tool_loop=mcp.supervisor.loop)
            client = mcp.supervisor.run(connection.client())
            call_tool = client.call_tool

            async def timed_call_tool(*a: Any, **kw: Any) -> Any:
                start = clock()
                try:
                    return await call_tool(*a, **kw)
                finally:
                    inner.append((clock() - start) / 1000.0)

            # The bench's own instrument on this one client object (the connection calls it as ``call_tool``), so
            # the direct and the dispatched calls are timed by the same wrapper.
            client.call_tool = timed_call_tool  # type: ignore[method-assign]

            def one(variant: str, call: Callable[[], object]) -> tuple[str, float, float]:
                before = len(inner)
                start = clock()
                call()
                took = (clock() - start) / 1000.0
                return variant, took, took - sum(inner[before:])

            async def on_loop(n: int, through: bool) -> list[tuple[str, float, float]]:
                out = []
                for _ in range(n):
                    before = len(inner)
                    start = clock()
                    if through:
                        _expect_ok(await dispatcher.adispatch("get_current_time", args, session_id="b"), "MCP")
                    else:
                        await client.call_tool("get_current_time", args)
                    took = (clock() - start) / 1000.0
                    out.append(("in_loop" if through else "sdk", took, took - sum(inner[before:])))
                return out

            def sdk_from_thread() -> None:
                mcp.supervisor.run(client.call_tool("get_current_time", args))

            def dispatch_from_thread() -> None:
                _expect_ok(dispatcher.dispatch("get_current_time", args, session_id="b"), "MCP")

            for rounds, keep in ((1, False), (max(1, iterations // block), True)):
                for _ in range(rounds):
                    rows = mcp.supervisor.run(on_loop(block, False))
                    rows += mcp.supervisor.run(on_loop(block, True))
                    rows += [one("sdk_thread", sdk_from_thread) for _ in range(block)]
                    rows += [one("sync", dispatch_from_thread) for _ in range(block)]
                    if keep:
                        for variant, took, left in rows:
                            wall[variant].append(took)
                            outside[variant].append(left)
            dispatcher.close()

    def timing(name: str, values: list[float]) -> Timing:
        values = sorted(values)
        return Timing(name, len(values), round(statistics.median(values), 3), round(_percentile(values, 0.95), 3))

    def path(sdk: str, through: str, sdk_name: str, through_name: str) -> McpPath:
        return McpPath(
            wall=Overhead(timing(sdk_name, wall[sdk]), timing(through_name, wall[through]), MCP_TARGET_US),
            outside=Overhead(
                timing(f"{sdk_name}, outside call_tool", outside[sdk]),
                timing(f"{through_name}, outside call_tool", outside[through]),
                MCP_TARGET_US,
            ),
        )

    return McpOverhead(
        in_loop=path("sdk", "in_loop", "SDK call_tool on the connection's loop", "adispatch on the connection's loop"),
        sync=path("sdk_thread", "sync", "SDK call_tool from another thread", "dispatch() from another thread"),
    )
