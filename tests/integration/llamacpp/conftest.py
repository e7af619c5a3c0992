"""One SmolLM2 backend for the llama.cpp integration tests (loading it is the expensive part)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tooldispatch.backends.llamacpp import LlamaCppBackend


@pytest.fixture(scope="session")
def smollm2_backend(smollm2_path: Path) -> Iterator[LlamaCppBackend]:
    """SmolLM2-135M-Instruct Q4_1 in-process, small context and two threads."""
    backend = LlamaCppBackend(smollm2_path, manifest="smollm2-135m-instruct", n_ctx=2048, n_threads=2)
    yield backend
    backend.close()
