"""Chaos: the stdio server is killed mid-call 100 times over read-only and side-effecting calls.

Zero duplicate side effects (each id's effect at most once, a repeat of an unknown outcome is refused), every
call ends with a result or a structured error, and no server process outlives the supervisor.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from _mcp_helpers import HERE, alive

from tooldispatch.dispatch import Dispatcher
from tooldispatch.mcp.config import parse_config
from tooldispatch.mcp.source import McpServers
from tooldispatch.store import Store

pytestmark = pytest.mark.integration
KILLS = 100


def _wait_for(journal: Path, line_start: str, worker: threading.Thread, deadline: float) -> int | None:
    """The pid of the server once the journal shows the call started; None if the call ended first (or at the
    deadline)."""
    while time.monotonic() < deadline:
        if journal.exists():
            for line in journal.read_text().splitlines():
                if line.startswith(line_start):
                    return int(line.split()[-1])
        if not worker.is_alive():
            return None
        time.sleep(0.002)
    return None


@pytest.mark.timeout(240)
def test_kill_the_stdio_server_mid_call_100_times(tmp_path: Path) -> None:
    """100 kills mid-call: no duplicate effect, every call answered (ok or a JSON error), no orphan process."""
    journal = tmp_path / "journal.txt"
    need_mcp = pytest.importorskip("mcp")
    assert need_mcp is not None
    configs = parse_config(
        {
            "mcpServers": {
                "chaos": {
                    "command": sys.executable,
                    "args": [str(HERE / "_chaos_server.py"), str(journal)],
                    "trust": "annotations",
                    "timeout_s": 60,
                }
            }
        }
    )
    store = Store(tmp_path / "state.db")
    rng = random.Random(17)
    outcomes: Counter[str] = Counter()
    started = time.monotonic()
    with McpServers(configs, store=store, log_dir=tmp_path / "logs", backoff_base_s=0.01) as servers:
        dispatcher = Dispatcher(servers.servers["chaos"].registry, store=store)
        connection = servers.servers["chaos"].connection
        kills, i = 0, 0
        while kills < KILLS and i < 2 * KILLS:
            i += 1
            tool = "record" if kills % 2 else "lookup"
            call_id = f"c{i}"
            box: dict[str, object] = {}
            worker = threading.Thread(
                target=lambda t=tool, c=call_id, b=box: b.update(r=dispatcher.dispatch(t, {"id": c}))
            )
            worker.start()
            pid = _wait_for(journal, f"start {tool} {call_id} ", worker, time.monotonic() + 30)
            if pid is not None:
                time.sleep(rng.uniform(0.0, 0.05))
                os.kill(pid, signal.SIGKILL)
                kills += 1
            worker.join(60)
            assert not worker.is_alive(), f"call {i} did not end"
            result = box["r"]
            content = json.loads(result.content)  # type: ignore[attr-defined]
            if result.status != "ok":  # type: ignore[attr-defined]
                assert set(content) >= {"error", "message", "recoverable", "suggestion"}
            if pid is None:
                # The call ended before reaching the server (a restart slower than half its budget): nothing ran.
                assert result.status == "error" and content["recoverable"] is True, result.content  # type: ignore[attr-defined]
                continue
            outcomes[f"{tool}:{result.status}:{result.reason}"] += 1  # type: ignore[attr-defined]
            if tool == "record":
                repeat = dispatcher.dispatch(tool, {"id": call_id})
                assert repeat.reason in ("idempotency_conflict", "idempotent_replay"), repeat.content
        pids = list(connection.pids)
        dispatcher.close()
    effects = Counter(line.split()[1] for line in journal.read_text().splitlines() if line.startswith("effect "))
    assert effects, "no side effect ever happened"
    assert max(effects.values()) == 1
    assert kills == KILLS
    assert outcomes["record:error:exception"] == KILLS // 2
    assert outcomes["lookup:ok:None"] == KILLS // 2
    assert len(pids) >= KILLS
    assert [p for p in pids if alive(p)] == []
    assert time.monotonic() - started < 200
