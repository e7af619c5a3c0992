"""Profiles build working backends: the default in-process one and the llama-cpp-python server one."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooldispatch.backends.base import ChatRequest, collect
from tooldispatch.backends.llamacpp import LlamaCppBackend
from tooldispatch.profiles import backend_from_profile

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


async def test_default_profile_runs_smollm2_in_process(smollm2_path: Path) -> None:
    """``cpu-llamacpp`` builds the in-process llama.cpp backend, which answers a turn up to its token limit."""
    backend = backend_from_profile("cpu-llamacpp")
    assert isinstance(backend, LlamaCppBackend)
    story = [{"role": "user", "content": "Write a long story about a dragon who learns to bake bread."}]
    done = await collect(backend.stream(ChatRequest(messages=story, max_tokens=8)))
    assert done.finish_reason == "length"
    assert done.content != ""
