"""Turn a profile into the exact server command, start it, and wait until it answers.

``plan_launch`` is pure (it fills the placeholders and picks the launcher), so ``serve --dry-run`` prints
exactly what ``serve`` would run. ``start_server`` starts the process with its output in a log file, and
``wait_until_ready`` polls ``GET /v1/models`` until it answers, the process dies, or time runs out; the
errors quote the server's last log lines.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tooldispatch.errors import BackendUnavailable, ConfigError
from tooldispatch.home import models_dir
from tooldispatch.profiles.kinds import kind
from tooldispatch.profiles.schema import Profile

_PLACEHOLDER = re.compile(r"\{(host|port|model_path|python|home|cache|models)\}")


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """Everything needed to start a profile's server.

    Attributes:
        profile: the profile's name.
        launcher: ``default`` or the alternative's name.
        argv: the command, placeholders filled.
        env: extra environment variables.
        host: where the server listens.
        port: its port.
        base_url: where the client connects (``/v1`` root).
        requires: the executable that must be on ``PATH``.
        ready_timeout_s: how long to wait for ``/v1/models``.
    """

    profile: str
    launcher: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = 8000
    base_url: str = ""
    requires: str = ""
    ready_timeout_s: float = 600.0

    @property
    def command_line(self) -> str:
        """The command as one shell-quoted line, with environment assignments first."""
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        line = shlex.join(self.argv)
        return f"{prefix} {line}" if prefix else line


def fill(text: str, values: Mapping[str, str]) -> str:
    """Replace ``{host}``, ``{port}``, ``{model_path}``, ``{python}``, ``{home}``, ``{cache}`` and ``{models}``;
    other braces stay."""
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


def cache_home() -> str:
    """The user's cache folder: ``$XDG_CACHE_HOME``, else ``~/.cache`` (the ``{cache}`` placeholder)."""
    return os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")


def client_host(host: str) -> str:
    """The address a client uses for a server listening on ``host`` (a wildcard becomes loopback)."""
    return "127.0.0.1" if host in ("0.0.0.0", "::", "") else host


def _model_path(profile: Profile, override: str | None, values: Mapping[str, str]) -> str:
    if override:
        return override
    assert profile.server is not None
    if profile.server.model_path:
        return fill(profile.server.model_path, values)
    if profile.model:
        from tooldispatch.models import resolve

        return str(resolve(profile.model))
    raise ConfigError(
        f"{profile.path}: the command uses {{model_path}} but the profile sets no model; pass --model-path"
    )


def plan_launch(
    profile: Profile,
    *,
    launcher: str | None = None,
    host: str | None = None,
    port: int | None = None,
    model_path: str | None = None,
) -> LaunchPlan:
    """Fill in a profile's launch command.

    Args:
        profile: the profile.
        launcher: an alternative's name (``container``), or ``None`` for the default command.
        host: listen address override.
        port: port override.
        model_path: model path override (a GGUF for llama.cpp servers, a Hugging Face folder for vLLM).

    Raises:
        ConfigError: the profile launches nothing (in-process or remote), or the launcher is unknown.
    """
    server = profile.server
    if server is None:
        if kind(profile.backend).in_process:
            raise ConfigError(
                f"profile {profile.name!r} runs the model in-process; there is no server to start. "
                f'Run it directly: tooldispatch run "..." --profile {profile.name}'
            )
        raise ConfigError(
            f"profile {profile.name!r} talks to a remote API; there is no server to start. "
            f'Use it directly: tooldispatch run "..." --profile {profile.name}'
        )
    if launcher in (None, "default"):
        chosen, name = server.default, "default"
    elif launcher in server.alternatives:
        chosen, name = server.alternatives[launcher], launcher
    else:
        known = ", ".join(["default", *server.alternatives])
        raise ConfigError(f"profile {profile.name!r} has no launcher {launcher!r}; choose one of {known}")
    listen = host or server.host
    chosen_port = port if port is not None else server.port
    values = {
        "host": listen,
        "port": str(chosen_port),
        "python": sys.executable,
        "home": str(Path.home()),
        "cache": cache_home(),
        "models": str(models_dir()),
    }
    if any("{model_path}" in arg for arg in chosen.command):
        values["model_path"] = _model_path(profile, model_path, values)
    argv = tuple(fill(arg, values) for arg in chosen.command)
    base = profile.client.base_url if profile.client else "http://{host}:{port}/v1"
    base_url = fill(base, {**values, "host": client_host(listen)})
    return LaunchPlan(
        profile=profile.name,
        launcher=name,
        argv=argv,
        env=dict(chosen.env),
        host=listen,
        port=chosen_port,
        base_url=base_url,
        requires=chosen.requires or argv[0],
        ready_timeout_s=server.ready_timeout_s,
    )


def tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a log file (empty when it does not exist)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def start_server(plan: LaunchPlan, *, log_path: Path) -> subprocess.Popen[bytes]:
    """Start the planned server with its output in ``log_path``.

    Raises:
        ConfigError: the executable is not on ``PATH``.
    """
    exe = plan.requires or plan.argv[0]
    if shutil.which(exe) is None and not Path(exe).is_file():
        raise ConfigError(
            f"{exe!r} is not on PATH, so profile {plan.profile!r} cannot start its server; "
            "install it (see the profile's notes) or pick another launcher with --launcher"
        )
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        return subprocess.Popen(
            list(plan.argv),
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **plan.env},
            start_new_session=True,
        )


def models_answer(base_url: str, *, timeout_s: float = 2.0) -> bool:
    """Whether ``GET {base_url}/models`` answers with HTTP 200."""
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=timeout_s) as resp:
            return int(resp.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def wait_until_ready(
    plan: LaunchPlan,
    process: subprocess.Popen[bytes],
    *,
    log_path: Path,
    timeout_s: float | None = None,
    poll_s: float = 0.25,
) -> float:
    """Poll ``/v1/models`` until the server answers; return the seconds it took.

    Raises:
        BackendUnavailable: the process exited, or it did not answer in time; the message quotes its log.
    """
    limit = plan.ready_timeout_s if timeout_s is None else timeout_s
    started = time.monotonic()
    while True:
        code = process.poll()
        if code is not None:
            raise BackendUnavailable(
                f"the {plan.profile} server exited with code {code} before answering on {plan.base_url}.\n"
                f"Command: {plan.command_line}\nLast lines of {log_path}:\n{tail(log_path)}"
            )
        if models_answer(plan.base_url):
            return time.monotonic() - started
        if time.monotonic() - started > limit:
            raise BackendUnavailable(
                f"the {plan.profile} server did not answer on {plan.base_url}/models within {limit:g} s.\n"
                f"Command: {plan.command_line}\nLast lines of {log_path}:\n{tail(log_path)}"
            )
        time.sleep(poll_s)


def stop_server(process: subprocess.Popen[bytes], *, grace_s: float = 10.0) -> None:
    """Terminate the server and its workers (kill them after ``grace_s``), then reap it."""
    if process.poll() is not None:
        return
    _signal_group(process, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        _signal_group(process, signal.SIGKILL)
        process.wait()


def _signal_group(process: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """Signal the server's own process group (it was started in a new session, so its workers go too)."""
    try:
        os.killpg(process.pid, sig)
    except ProcessLookupError:
        return
