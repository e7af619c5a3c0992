"""A process killed in the middle of a side-effecting call: after a restart the effect never runs twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _chaos_tools import charge_registry

from tooldispatch.dispatch import Dispatcher
from tooldispatch.store import Store
from tooldispatch.tools.demo import DemoWorld

pytestmark = pytest.mark.integration

CHILD = Path(__file__).with_name("_killed_child.py")


def _kill_mid_call(tmp_path: Path, hold: str) -> tuple[Path, Path]:
    store, world_path, marker = tmp_path / "state.db", tmp_path / "world.db", tmp_path / "invoked"
    DemoWorld.seed(world_path).close()
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(store), str(world_path), str(marker), hold],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            if proc.poll() is not None:
                output = proc.stdout.read().decode() if proc.stdout else ""
                pytest.fail(f"the child exited with {proc.returncode} before invoking the tool:\n{output}")
            if time.monotonic() > deadline:
                pytest.fail("the child did not invoke the tool within 60 s")
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout:
            proc.stdout.close()
    return store, world_path


@pytest.mark.parametrize(("hold", "effects"), [("after_effect", 1), ("before_effect", 0)])
def test_killed_mid_call_then_restarted(tmp_path: Path, hold: str, effects: int) -> None:
    """Killed after (or before) its effect, the call is left in flight; the restarted process refuses to re-run it."""
    store_path, world_path = _kill_mid_call(tmp_path, hold)
    world = DemoWorld(world_path)
    assert world.count_effects("charge", "o-101") == effects

    store = Store(store_path)
    rows = store.fetchall("SELECT session_id, tool, state FROM idempotency")
    assert rows == [("s1", "charge", "in_flight")]
    store.close()

    restarted = Dispatcher(charge_registry(world), store=store_path)
    try:
        result = restarted.dispatch("charge", {"order_id": "o-101"}, session_id="s1")
        assert (result.status, result.reason) == ("rejected", "idempotency_conflict")
        envelope = json.loads(result.content)
        assert envelope["recoverable"] is False
        assert envelope["message"].endswith("has not finished; if the process stopped mid-call, its outcome is unknown")
        assert envelope["suggestion"] == (
            "do not repeat it; check the current state with a read-only tool and tell the user"
        )
        assert world.count_effects("charge", "o-101") == effects

        other = restarted.dispatch("charge", {"order_id": "o-102"}, session_id="s1")
        assert other.status == "ok"
        assert world.count_effects("charge") == effects + 1
    finally:
        restarted.close()
        world.close()
