"""Drive ``tooldispatch`` in process as a user's shell would: arguments in, exit code and both streams out."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from tooldispatch.cli import main


@dataclass
class Ran:
    """What one command printed and how it exited."""

    code: int
    out: str
    err: str


Cli = Callable[..., Ran]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Cli:
    """Run ``tooldispatch ARGS`` through its console-script entry point (``main``), stdin optional."""

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
