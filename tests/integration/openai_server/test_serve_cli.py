"""``tooldispatch serve`` end to end: launch, wait for /v1/models, print how to connect, stop on Ctrl+C."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tooldispatch.profiles import models_answer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_serve_launches_waits_and_stops(smollm2_path: Path, tmp_path: Path) -> None:
    """serve prints the ready line with the run commands, the server answers, and SIGINT stops it cleanly."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    argv = [
        sys.executable, "-m", "tooldispatch", "serve", "--profile", "local-llama-cpp-python",
        "--port", str(port), "--model-path", str(smollm2_path), "--log", str(tmp_path / "server.log"),
    ]  # fmt: skip
    # A shell's background job has SIGINT ignored and its children inherit that; a user's Ctrl+C reaches a
    # foreground command with the default disposition, which the child gets here whatever launched pytest.
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line.rstrip("\n"))
            if line.startswith("Press Ctrl+C"):
                break
        assert models_answer(url)
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert lines[0].startswith(f"starting {sys.executable} -m llama_cpp.server --model {smollm2_path} ")
    assert lines[1] == f"log: {tmp_path / 'server.log'}"
    assert lines[2].startswith(f"ready on {url} after ")
    assert lines[3] == f'  tooldispatch run "TASK" --profile local-llama-cpp-python --base-url {url}'
    assert rest.strip() == "server stopped"
    assert proc.returncode == 0
    assert not models_answer(url)
