"""Finding a stdio server's executable: on PATH, else beside the running interpreter."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tooldispatch.mcp.stdio import resolve_command


def test_a_command_on_path_is_used_as_found(tmp_path: Path) -> None:
    """A name PATH finds resolves to that file."""
    exe = tmp_path / "my-server"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert resolve_command("my-server", path=str(tmp_path)) == str(exe)


def test_a_command_beside_the_interpreter_is_found_without_an_activated_venv() -> None:
    """A name absent from PATH but installed beside sys.executable (an unactivated venv) resolves there."""
    name = os.path.basename(sys.executable)
    assert resolve_command(name, path="") == os.path.join(os.path.dirname(sys.executable), name)


def test_a_path_with_a_separator_is_left_as_given() -> None:
    """An explicit path is the user's choice and is not searched."""
    assert resolve_command("/opt/servers/run-me", path="") == "/opt/servers/run-me"


def test_a_missing_command_says_how_to_make_it_found() -> None:
    """Neither on PATH nor beside the interpreter: one message naming the install and the full-path fix."""
    with pytest.raises(FileNotFoundError) as info:
        resolve_command("no-such-mcp-server-xyz", path="")
    assert str(info.value) == (
        f"'no-such-mcp-server-xyz' is neither on PATH nor beside {sys.executable}: install it "
        "(pip install no-such-mcp-server-xyz for a Python server) or give its full path in the config's 'command'"
    )
