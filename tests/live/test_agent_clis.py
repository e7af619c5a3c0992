"""Qwen Code and opencode, the real npm clients, against ``tooldispatch proxy`` with the packaged model in process.

Marked ``live`` (not in ``make test``): each run prefills the client's whole system prompt on the CPU, 17k tokens
for Qwen Code and 7k for opencode, minutes with the 0.5B. ``make test-clients`` installs the two clients with npm
and runs these tests; ``TOOLDISPATCH_LIVE_MODEL`` picks the model (default the packaged 0.5B).

The proxy gets ``--timeout 3000``: its default (600 s for a whole answer) is shorter than a 1.5B model's CPU
prefill of Qwen Code's prompt. What they check is what a user of the client sees: the client exits 0, every
request it sent was answered 200 (499 only where the client itself hung up), and the proxy kept the bodies
(``--record``). The run's store and the client's output stay in the test's folder;
``tests/fixtures/clients/extract.py`` turns a store into the replayed fixtures of
``tests/integration/proxy_http/test_recorded_clients.py``. Whether the model reads the file and
answers right is printed, not asserted: that is the model's part.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.live, pytest.mark.timeout(3600)]

MODEL = os.environ.get("TOOLDISPATCH_LIVE_MODEL", "qwen2.5-coder-0.5b-instruct@Q4_K_M")
CLIENTS_DIR = Path(os.environ.get("TOOLDISPATCH_CLIENTS_DIR", "build/clients"))
PROMPT = (
    "Who owns the release? The answer is in notes.txt: read it with your file-reading tool, then answer in one "
    "sentence."
)
NOTES = "The release is planned for March 14.\nOwner: Dana.\n"
N_CTX = 32768


def _client(name: str) -> str:
    found = CLIENTS_DIR / "node_modules" / ".bin" / name
    if found.is_file():
        return str(found)
    on_path = shutil.which(name)
    if on_path is None:
        pytest.skip(f"no {name}: run make test-clients (npm install --prefix {CLIENTS_DIR} ...)")
    return on_path


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _proxy(tmp_path: Path, port: int) -> subprocess.Popen[bytes]:
    argv = [
        sys.executable, "-m", "tooldispatch", "proxy", "--model", MODEL, "--port", str(port),
        "--store", str(tmp_path / "state.db"), "--n-ctx", str(N_CTX), "--record", "--timeout", "3000",
    ]  # fmt: skip
    log = (tmp_path / "proxy.log").open("wb")
    proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the proxy exited with {proc.returncode}: {(tmp_path / 'proxy.log').read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            time.sleep(1)
    proc.kill()
    pytest.fail("the proxy did not listen within 600 s")


def _run(tmp_path: Path, argv: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    project = tmp_path / "project"
    # opencode takes its working folder from PWD, which a child started with cwd= inherits from this process.
    env = {**os.environ, **env, "PWD": str(project)}
    done = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True, timeout=3000)
    (tmp_path / "client.out").write_text(done.stdout)
    (tmp_path / "client.err").write_text(done.stderr)
    return done, time.monotonic() - started


def _check(tmp_path: Path, done: subprocess.CompletedProcess[str], wall_s: float) -> None:
    db = sqlite3.connect(tmp_path / "state.db")
    statuses = [row[0] for row in db.execute("SELECT status FROM proxy_requests ORDER BY created_at")]
    recorded = db.execute("SELECT COUNT(*) FROM proxy_records").fetchone()[0]
    print(json.dumps({"model": MODEL, "rc": done.returncode, "wall_s": round(wall_s), "statuses": statuses}))
    print("client said:", done.stdout.strip()[-400:])
    assert done.returncode == 0, done.stderr[-2000:]
    assert statuses and all(s in (200, 499) for s in statuses), statuses
    assert 200 in statuses
    assert recorded == len(statuses)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "notes.txt").write_text(NOTES)
    (tmp_path / "home").mkdir()
    port = _port()
    proc = _proxy(tmp_path, port)
    yield tmp_path, port
    proc.terminate()
    proc.wait(timeout=60)


def test_qwen_code_finishes_a_headless_task_through_the_proxy(served: tuple[Path, int]) -> None:
    """``qwen --yolo PROMPT`` with the proxy as its OpenAI endpoint exits 0 with every request answered."""
    tmp_path, port = served
    served_model = MODEL.split("@")[0]
    argv = [
        _client("qwen"), "--auth-type", "openai", "--openai-base-url", f"http://127.0.0.1:{port}/v1",
        "--openai-api-key", "none", "-m", served_model, "--yolo", "--max-session-turns", "8", PROMPT,
    ]  # fmt: skip
    # Qwen Code gives up on a request after 120 s and sends it again; a CPU prefill of its prompt takes longer.
    env = {"HOME": str(tmp_path / "home"), "QWEN_CODE_API_TIMEOUT_MS": "3000000"}
    done, wall_s = _run(tmp_path, argv, env)
    _check(tmp_path, done, wall_s)


def test_opencode_finishes_a_task_through_the_proxy(served: tuple[Path, int]) -> None:
    """``opencode run PROMPT`` with the proxy as an OpenAI-compatible provider exits 0 with every request answered."""
    tmp_path, port = served
    served_model = MODEL.split("@")[0]
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "tooldispatch": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "tooldispatch proxy",
                "options": {"baseURL": f"http://127.0.0.1:{port}/v1", "apiKey": "none", "timeout": 3000000},
                "models": {
                    served_model: {"name": served_model, "tool_call": True, "limit": {"context": N_CTX, "output": 1024}}
                },
            }
        },
        "model": f"tooldispatch/{served_model}",
        "small_model": f"tooldispatch/{served_model}",
    }
    (tmp_path / "project" / "opencode.json").write_text(json.dumps(config, indent=1))
    env = {"HOME": str(tmp_path / "home")}
    # A first start in a new home sets opencode up and may answer with its default provider instead of the
    # project's; `opencode models` twice leaves it set up, and says whether it reads the project's provider.
    for _ in range(2):
        listed, _ = _run(tmp_path, [_client("opencode"), "models"], env)
    assert f"tooldispatch/{served_model}" in listed.stdout, listed.stdout[-2000:]
    done, wall_s = _run(tmp_path, [_client("opencode"), "run", PROMPT], env)
    _check(tmp_path, done, wall_s)
