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


def _foreground_sigint() -> None:
    """SIGINT as a foreground command gets it: default disposition, not blocked. A child inherits an ignored or
    blocked SIGINT from whatever launched pytest (a shell's background job ignores it)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


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
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_foreground_sigint,
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
