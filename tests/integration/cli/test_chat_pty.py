"""``tooldispatch chat`` on a real pseudo-terminal: prompt marker, readline history (Up), Ctrl-D to end."""

from __future__ import annotations

import codecs
import json
import os
import pty
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from upstream import upstream

pytestmark = pytest.mark.integration

UP = "\x1b[A"


class Terminal:
    """A child process on a pseudo-terminal, read until expected text appears (bounded in time)."""

    def __init__(self, argv: list[str], env: dict[str, str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: become the command
            os.execvpe(argv[0], argv, env)
        self.seen = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def expect(self, text: str, timeout_s: float = 60.0) -> str:
        deadline = time.monotonic() + timeout_s
        while text not in self.seen:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{text!r} did not appear; the terminal shows:\n{self.seen[-2000:]}")
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # the child closed the terminal
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"the terminal closed before {text!r}:\n{self.seen[-2000:]}")
                self.seen += self._decoder.decode(chunk)
        at = self.seen.index(text) + len(text)
        before, self.seen = self.seen[:at], self.seen[at:]
        return before

    def send(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def wait(self, timeout_s: float = 30.0) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
            try:
                select.select([self.fd], [], [], 0.1)
                os.read(self.fd, 4096)
            except OSError:
                time.sleep(0.05)
        os.kill(self.pid, 9)
        os.waitpid(self.pid, 0)
        raise AssertionError("chat did not exit after Ctrl-D")


@pytest.fixture
def model_url() -> Iterator[str]:
    """The scripted model's base URL."""
    with upstream() as url:
        yield url


def test_chat_on_a_terminal_keeps_history_and_ends_on_ctrl_d(model_url: str, tmp_path: Path) -> None:
    """The prompt marker shows; Up recalls the last line (readline); Ctrl-D ends with exit 0; both lines are kept."""
    env = {**os.environ, "TERM": "xterm", "COLUMNS": "100", "LINES": "40"}
    argv = [sys.executable, "-m", "tooldispatch", "chat", "--profile", "local-llama-cpp-python"]
    term = Terminal([*argv, "--base-url", model_url], env)
    term.expect("› ")
    term.send("look up o-101\r")
    term.expect("Done: ")
    term.expect("› ")
    term.send(UP)
    term.expect("look up o-101")  # readline put the previous line back
    term.send("\r")
    term.expect("Done: ")
    term.expect("› ")
    term.send("\x04")
    assert term.wait() == 0
    logs = subprocess.run(
        [sys.executable, "-m", "tooldispatch", "logs", "--json"], capture_output=True, text=True, env=env, check=True
    )
    rows = json.loads(logs.stdout)
    assert [r["task"] for r in rows] == ["look up o-101", "look up o-101"]
    assert rows[0]["session_id"] == rows[1]["session_id"]
    assert rows[0]["parent_id"] == rows[1]["id"]
    assert (Path(os.environ["XDG_DATA_HOME"]) / "tooldispatch" / "chat_history").read_text().count("look up") >= 1
