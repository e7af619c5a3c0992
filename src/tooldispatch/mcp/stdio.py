"""A stdio transport for the ``mcp`` SDK's ``Client`` that keeps hold of the server's process.

The SDK's own ``stdio_client`` does not expose the child process, and supervision needs it: the pid for
the log and for tests, whether the server is still alive before a request is sent (a request never sent
cannot have had an effect), and the exit status after a crash. The framing is the SDK's (one JSON-RPC
message per line, read with ``mcp_types.jsonrpc_message_adapter``); stopping follows the spec's sequence
(close stdin, wait, then end the whole process group with the SDK's ``terminate_posix_process_tree``), with
every wait bounded, and the child is always reaped.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import IO, Any

import anyio
import anyio.abc
import mcp_types
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

from tooldispatch.mcp.config import ServerConfig

STOP_GRACE_S = 2.0
"""How long a server may take to exit after its stdin closes, and after SIGTERM, before it is killed."""

_INHERITED = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV")


def server_env(config: ServerConfig) -> dict[str, str]:
    """A minimal inherited environment plus the configured ``env`` (secrets in the parent's stay there)."""
    env = {k: v for k, v in os.environ.items() if k in _INHERITED and not v.startswith("()")}
    env.update(config.env)
    return env


def resolve_command(command: str, *, path: str | None = None) -> str:
    """The executable to start for ``command``: as ``PATH`` finds it, else beside this Python interpreter.

    A server installed into the same virtualenv as tooldispatch (``pip install mcp-server-time``) is found
    when the virtualenv was never activated, as a user running ``.venv/bin/tooldispatch`` expects.

    Raises:
        FileNotFoundError: neither finds it; the message says how to make it found.
    """
    if os.sep in command:
        return command
    found = shutil.which(command, path=path)
    if found is not None:
        return found
    beside = os.path.join(os.path.dirname(sys.executable), command)
    if os.access(beside, os.X_OK):
        return beside
    raise FileNotFoundError(
        f"{command!r} is neither on PATH nor beside {sys.executable}: install it (pip install {command} "
        "for a Python server) or give its full path in the config's 'command'"
    )


class StdioProcess:
    """One run of a stdio server: ``async with process.connect() as streams`` for the SDK's ``Client``.

    Args:
        config: the server.
        errlog: where the server's stderr goes (an open file).
    """

    def __init__(self, config: ServerConfig, errlog: IO[Any]) -> None:
        self.config = config
        self.errlog = errlog
        self.process: anyio.abc.Process | None = None
        self.exited = anyio.Event()

    @property
    def pid(self) -> int | None:
        """The server's process id once started."""
        return self.process.pid if self.process is not None else None

    @property
    def alive(self) -> bool:
        """Whether the process was started and has not exited."""
        return self.process is not None and self.process.returncode is None and not self.exited.is_set()

    @property
    def returncode(self) -> int | None:
        """The exit status once the process ended (negative: killed by that signal)."""
        return self.process.returncode if self.process is not None else None

    @asynccontextmanager
    async def connect(self) -> AsyncIterator[tuple[Any, Any]]:
        """Start the server and yield the SDK's (read stream, write stream) pair; stop it on exit.

        Raises:
            OSError: the command cannot be started (not found, not executable).
        """
        assert self.config.command is not None
        command = resolve_command(self.config.command, path=server_env(self.config).get("PATH"))
        process = await anyio.open_process(
            [command, *self.config.args],
            env=server_env(self.config),
            cwd=self.config.cwd,
            stderr=self.errlog,
            start_new_session=True,
        )
        self.process = process
        to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)

        async def read_stdout() -> None:
            assert process.stdout is not None
            buffer = b""
            try:
                async with to_session:
                    async for chunk in process.stdout:
                        lines = (buffer + chunk).split(b"\n")
                        buffer = lines.pop()
                        for line in lines:
                            if line.strip():
                                await to_session.send(_parse(line))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError):
                pass
            finally:
                self.exited.set()

        async def write_stdin() -> None:
            assert process.stdin is not None
            try:
                async with from_session:
                    async for message in from_session:
                        data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                        await process.stdin.send(data.encode("utf-8") + b"\n")
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                await to_session.aclose()

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_stdout)
            tg.start_soon(write_stdin)
            try:
                yield read_stream, write_stream
            finally:
                with anyio.CancelScope(shield=True):
                    await write_stream.aclose()
                    await read_stream.aclose()
                    await stop_process(process)
                tg.cancel_scope.cancel()


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


async def stop_process(process: anyio.abc.Process) -> None:
    """Close stdin, wait, end the process group (SIGTERM then SIGKILL), and reap the child; every wait bounded."""
    if process.stdin is not None:
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    if not await _exited(process, STOP_GRACE_S):
        await terminate_posix_process_tree(process, STOP_GRACE_S)
        if not await _exited(process, STOP_GRACE_S):
            with suppress(ProcessLookupError):
                os.kill(process.pid, signal.SIGKILL)
            await _exited(process, STOP_GRACE_S)
    else:
        # The server exited; anything it left in its process group goes too.
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    for pipe in (process.stdout, process.stderr):
        if pipe is not None:
            with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                await pipe.aclose()
    with anyio.move_on_after(STOP_GRACE_S):
        await process.wait()


async def _exited(process: anyio.abc.Process, timeout_s: float) -> bool:
    with anyio.move_on_after(timeout_s):
        while process.returncode is None:
            await anyio.sleep(0.01)
        return True
    return False
