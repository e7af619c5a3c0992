"""Durability on a real SQLite file: a process killed mid-call, and many sessions on one file."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from tooldispatch.dispatch import Dispatcher, Registry

pytestmark = pytest.mark.integration

SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from tooldispatch.dispatch import Dispatcher, Registry

    db, effects = sys.argv[1], sys.argv[2]

    def charge(order_id: str, amount: int) -> dict:
        with open(effects, "a") as f:
            f.write(f"{order_id}:{amount}\\n")
        os.kill(os.getpid(), signal.SIGKILL)
        return {"charged": amount}

    reg = Registry()
    reg.register("charge", charge, read_only=False, idempotency_fields=["order_id"])
    Dispatcher(reg, store=db).dispatch("charge", {"order_id": "o1", "amount": 5}, session_id="s1")
    """
)


def _registry(effects: Path) -> Registry:
    def charge(order_id: str, amount: int) -> dict[str, int]:
        with effects.open("a") as f:
            f.write(f"{order_id}:{amount}\n")
        return {"charged": amount}

    reg = Registry()
    reg.register("charge", charge, read_only=False, idempotency_fields=["order_id"])
    return reg


def test_killed_mid_call_never_runs_twice(tmp_path: Path) -> None:
    """A process SIGKILLed inside a side-effecting tool leaves a record; the restarted one refuses to re-run."""
    db, effects = tmp_path / "state.db", tmp_path / "effects.txt"
    script = tmp_path / "crash.py"
    script.write_text(SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(db), str(effects)], capture_output=True, timeout=120)
    assert proc.returncode == -9
    assert effects.read_text() == "o1:5\n"
    d = Dispatcher(_registry(effects), store=db)
    r = d.dispatch("charge", {"order_id": "o1", "amount": 5}, session_id="s1")
    assert (r.status, r.reason) == ("rejected", "idempotency_conflict")
    assert "outcome is unknown" in r.content
    assert effects.read_text() == "o1:5\n"
    d.close()


def test_eight_sessions_with_repeats_run_each_effect_once(tmp_path: Path) -> None:
    """Eight threads each send 50 calls (every call twice) on one file: exactly 25 effects per session."""
    effects = tmp_path / "effects.txt"
    effects.touch()
    d = Dispatcher(_registry(effects), store=tmp_path / "state.db")
    statuses: list[tuple[str, str | None]] = []
    lock = threading.Lock()

    def session(n: int) -> None:
        for i in range(50):
            r = d.dispatch("charge", {"order_id": f"s{n}-o{i // 2}", "amount": 1}, session_id=f"s{n}")
            with lock:
                statuses.append((r.status, r.reason))

    threads = [threading.Thread(target=session, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = effects.read_text().splitlines()
    assert len(lines) == len(set(lines)) == 200
    assert set(statuses) == {("ok", None), ("ok", "idempotent_replay")}
    assert statuses.count(("ok", "idempotent_replay")) == 200
    d.close()
