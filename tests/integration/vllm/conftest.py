"""The vLLM server ``scripts/vllm-cpu.sh serve`` started, found through its state file.

vLLM takes minutes to start on a CPU, so these tests do not start it: ``scripts/vllm-cpu.sh serve`` does, once,
and writes ``${XDG_CACHE_HOME:-~/.cache}/tooldispatch/vllm-cpu/server.json``. Without that file, or with a server
that no longer answers, every test here skips with the command that fixes it. ``make test-vllm`` runs them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from tooldispatch.profiles import models_answer


def state_path() -> Path:
    """Where ``scripts/vllm-cpu.sh serve`` writes the running server's URL, model and pids."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "tooldispatch" / "vllm-cpu" / "server.json"


@dataclass(frozen=True, slots=True)
class VllmServer:
    """A running vLLM server.

    Attributes:
        base_url: its OpenAI API root (``http://127.0.0.1:PORT/v1``).
        model: the served model name.
    """

    base_url: str
    model: str


@pytest.fixture(scope="session")
def vllm_server() -> VllmServer:
    """The server the state file names, answering on ``/v1/models``; skips with the fix otherwise."""
    path = state_path()
    start = "scripts/vllm-cpu.sh install && scripts/vllm-cpu.sh convert && nice -n 5 scripts/vllm-cpu.sh serve"
    if not path.is_file():
        pytest.skip(f"no vLLM server: {path} does not exist; start one with {start}")
    state = json.loads(path.read_text())
    url = str(state["base_url"])
    if not models_answer(url, timeout_s=5.0):
        pytest.skip(f"the vLLM server in {path} does not answer on {url}/models; see scripts/vllm-cpu.sh status")
    return VllmServer(base_url=url, model=str(state["served_model"]))
