"""Deployment profiles: how a server is launched and how the backend talks to it, one TOML file each.

A profile is a TOML file ``<name>.toml``: the shipped ones are package data (``src/tooldispatch/data/profiles/``),
a user's own live in ``$XDG_CONFIG_HOME/tooldispatch/profiles/`` and win by name (:mod:`tooldispatch.packaged`).
Every table is checked against the keys it may hold, so a typo is an error naming the key and the file, never a
silently ignored setting. Example::

    description = "llama-server (Vulkan RADV build) on AMD Strix Halo"
    backend = "openai_compat"            # or "llamacpp" (in-process, no server)
    model = "qwen3-30b-a3b@Q4_K_M"       # a model manifest reference

    [client]                             # openai_compat only
    base_url = "http://{host}:{port}/v1"
    served_model = "qwen3-30b-a3b"
    dialect = "llama-server"             # vllm | llama-server | openrouter
    parse = "server"                     # server | client

    [server]                             # how `tooldispatch serve` starts it
    host = "127.0.0.1"
    port = 8080
    model_path = "{models}/qwen3-30b-a3b/Qwen3-30B-A3B-Q4_K_M.gguf"
    command = ["llama-server", "-m", "{model_path}", "--host", "{host}", "--port", "{port}"]

    [server.alternatives.container]      # other ways to launch (`serve --launcher container`)
    command = ["docker", "run", "..."]

Placeholders in ``command`` and ``base_url``: ``{host}``, ``{port}``, ``{model_path}``, ``{python}`` (this
interpreter), ``{home}`` (the user's home folder), ``{cache}`` (``$XDG_CACHE_HOME``, else ``~/.cache``) and
``{models}`` (the model cache, :func:`tooldispatch.home.models_dir`); ``model_path`` may use ``{home}``,
``{cache}`` and ``{models}`` too.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tooldispatch.errors import ConfigError
from tooldispatch.packaged import Entry, entries, folders, where
from tooldispatch.profiles.kinds import kind

_TOP = frozenset({"description", "backend", "model", "notes", "client", "server", "llamacpp"})
_CLIENT = frozenset(
    {
        "base_url",
        "served_model",
        "dialect",
        "parse",
        "api_key_env",
        "timeout_s",
        "max_retries",
        "extra_body",
        "provider",
        "headers",
    }
)
_PROVIDER = frozenset(
    {
        "only",
        "order",
        "ignore",
        "quantizations",
        "allow_fallbacks",
        "require_parameters",
        "data_collection",
        "zdr",
        "sort",
        "max_price",
    }
)
_SERVER = frozenset(
    {"command", "host", "port", "env", "model_path", "ready_timeout_s", "alternatives", "requires", "notes"}
)
_ALTERNATIVE = frozenset({"command", "env", "requires", "notes"})
_LLAMACPP = frozenset({"n_ctx", "n_threads", "seed", "tool_format", "chat_format_override", "prefix_cache_mb"})


@dataclass(frozen=True, slots=True)
class Launcher:
    """One way to start a server.

    Attributes:
        command: the argv, with placeholders.
        env: extra environment variables for the process.
        requires: the executable that must be on ``PATH`` (checked before launching).
        notes: what a person should know (container image, build flavour).
    """

    command: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    requires: str = ""
    notes: str = ""


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """How ``tooldispatch serve`` launches the profile's server.

    Attributes:
        default: the launcher used unless another is chosen.
        alternatives: other launchers by name (``container`` for the NGC image, ...).
        host: the address the server listens on and the client connects to.
        port: the port, always explicit.
        model_path: the model for the server: a GGUF file for llama.cpp servers, a Hugging Face folder for
            vLLM (a path; ``{home}``, ``{cache}`` and ``{models}`` are filled in, a relative path is taken
            from the working folder).
        ready_timeout_s: how long ``serve`` waits for ``/v1/models`` to answer.
    """

    default: Launcher
    alternatives: Mapping[str, Launcher] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = 8000
    model_path: str | None = None
    ready_timeout_s: float = 600.0


@dataclass(frozen=True, slots=True)
class ClientSpec:
    """How the ``openai_compat`` backend talks to the server.

    Attributes mirror ``OpenAICompatBackend``'s arguments; ``served_model`` is the ``model`` field of
    requests, ``base_url`` may use ``{host}`` and ``{port}``.
    """

    base_url: str
    served_model: str
    dialect: Literal["vllm", "llama-server", "openrouter"]
    parse: Literal["client", "server"] = "server"
    api_key_env: str | None = None
    timeout_s: float = 600.0
    max_retries: int = 0
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    provider: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Profile:
    """A deployment profile, as loaded from ``<name>.toml`` (shipped, or the user's own).

    Attributes:
        name: the file's stem.
        path: the file it came from.
        description: one line for ``--help`` and listings.
        backend: the backend kind (``profiles.factory.KINDS``: ``llamacpp`` in process, ``openai_compat`` a server).
        model: the ``name@QUANT`` manifest reference, when the profile names one.
        client: the client settings (``openai_compat`` only).
        server: how to launch the server, when there is one to launch.
        llamacpp: keyword arguments for the in-process backend (``llamacpp`` only).
        notes: free text shown by ``serve``.
    """

    name: str
    path: Path
    description: str
    backend: str
    model: str | None = None
    client: ClientSpec | None = None
    server: ServerSpec | None = None
    llamacpp: Mapping[str, Any] = field(default_factory=dict)
    notes: str = ""


def profiles_dir() -> Path:
    """The folder of the shipped profiles (``data/profiles`` of the package), or ``TOOLDISPATCH_CONFIGS_DIR``
    when set; the user's own in ``$XDG_CONFIG_HOME/tooldispatch/profiles`` win over them by name."""
    return folders("profiles")[0][1]


def _check(where: Path, table_name: str, table: Mapping[str, Any], allowed: frozenset[str]) -> None:
    for key in table:
        if key not in allowed:
            scope = f"[{table_name}] " if table_name else ""
            raise ConfigError(f"{where}: unknown key {scope}{key!r}; allowed keys: {', '.join(sorted(allowed))}")


_TOML_NAMES = {dict: "table", list: "array", str: "string", int: "integer", float: "float"}


def _get(where: Path, table: Mapping[str, Any], key: str, kind: type | tuple[type, ...], default: Any) -> Any:
    if key not in table:
        return default
    value = table[key]
    if isinstance(value, bool) and kind in (int, float, (int, float)):
        raise ConfigError(f"{where}: {key!r} must be a number, got {value!r}")
    if not isinstance(value, kind):
        kinds = (kind,) if isinstance(kind, type) else kind
        names = " or ".join(_TOML_NAMES.get(k, k.__name__) for k in kinds)
        raise ConfigError(f"{where}: {key!r} must be a {names}, got {value!r}")
    return value


def _launcher(where: Path, name: str, table: Mapping[str, Any], allowed: frozenset[str]) -> Launcher:
    command = table.get("command")
    if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
        raise ConfigError(f"{where}: [{name}] needs 'command', a non-empty list of strings")
    env = _get(where, table, "env", dict, {})
    return Launcher(
        command=tuple(command),
        env={str(k): str(v) for k, v in env.items()},
        requires=_get(where, table, "requires", str, ""),
        notes=_get(where, table, "notes", str, ""),
    )


def _server(where: Path, table: Mapping[str, Any]) -> ServerSpec:
    _check(where, "server", table, _SERVER)
    alternatives: dict[str, Launcher] = {}
    for alt_name, alt in _get(where, table, "alternatives", dict, {}).items():
        if not isinstance(alt, dict):
            raise ConfigError(f"{where}: [server.alternatives.{alt_name}] must be a table")
        _check(where, f"server.alternatives.{alt_name}", alt, _ALTERNATIVE)
        alternatives[alt_name] = _launcher(where, f"server.alternatives.{alt_name}", alt, _ALTERNATIVE)
    port = _get(where, table, "port", int, 8000)
    return ServerSpec(
        default=_launcher(where, "server", table, _SERVER),
        alternatives=alternatives,
        host=_get(where, table, "host", str, "127.0.0.1"),
        port=port,
        model_path=_get(where, table, "model_path", str, None),
        ready_timeout_s=float(_get(where, table, "ready_timeout_s", (int, float), 600.0)),
    )


def _client(where: Path, table: Mapping[str, Any]) -> ClientSpec:
    _check(where, "client", table, _CLIENT)
    for key in ("base_url", "served_model", "dialect"):
        if not isinstance(table.get(key), str):
            raise ConfigError(f"{where}: [client] needs {key!r} (a string)")
    dialect = table["dialect"]
    if dialect not in ("vllm", "llama-server", "openrouter"):
        raise ConfigError(f"{where}: [client] dialect {dialect!r} is not one of vllm, llama-server, openrouter")
    parse = _get(where, table, "parse", str, "server")
    if parse not in ("client", "server"):
        raise ConfigError(f"{where}: [client] parse {parse!r} is not 'client' or 'server'")
    provider = _get(where, table, "provider", dict, None)
    if provider is not None:
        _check(where, "client.provider", provider, _PROVIDER)
    return ClientSpec(
        base_url=table["base_url"],
        served_model=table["served_model"],
        dialect=dialect,
        parse=parse,
        api_key_env=_get(where, table, "api_key_env", str, None),
        timeout_s=float(_get(where, table, "timeout_s", (int, float), 600.0)),
        max_retries=_get(where, table, "max_retries", int, 0),
        extra_body=_get(where, table, "extra_body", dict, {}),
        provider=provider,
        headers={str(k): str(v) for k, v in _get(where, table, "headers", dict, {}).items()},
    )


def parse_profile(data: Mapping[str, Any], *, path: Path) -> Profile:
    """Build a ``Profile`` from parsed TOML.

    Raises:
        ConfigError: an unknown key (named with its file), a missing or mistyped value.
    """
    _check(path, "", data, _TOP)
    backend = data.get("backend")
    backend_kind = kind(backend, where=f"{path}: ")
    client = _client(path, _get(path, data, "client", dict, {})) if "client" in data else None
    if not backend_kind.in_process and client is None:
        raise ConfigError(f"{path}: an {backend_kind.name} profile needs a [client] table")
    llamacpp = _get(path, data, "llamacpp", dict, {})
    _check(path, "llamacpp", llamacpp, _LLAMACPP)
    return Profile(
        name=path.stem,
        path=path,
        description=_get(path, data, "description", str, ""),
        backend=backend_kind.name,
        model=_get(path, data, "model", str, None),
        client=client,
        server=_server(path, _get(path, data, "server", dict, {})) if "server" in data else None,
        llamacpp=llamacpp,
        notes=_get(path, data, "notes", str, ""),
    )


def load_profile(name: str | Path) -> Profile:
    """Load a profile by name (the user's own, else the shipped one) or by path to a TOML file.

    Raises:
        ConfigError: no such profile (the message lists the known ones), invalid TOML, or an unknown key.
    """
    candidate = Path(name)
    if candidate.suffix == ".toml" or candidate.is_file():
        path = candidate
    else:
        found = profile_entries()
        entry = found.get(str(name))
        if entry is None:
            known = ", ".join(found) or "none"
            raise ConfigError(f"no profile {str(name)!r} in {where('profiles')}; known profiles: {known}")
        path = entry.path
    if not path.is_file():
        known = ", ".join(list_profiles()) or "none"
        raise ConfigError(f"no profile {str(name)!r} (looked for {path}); known profiles: {known}")
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    return parse_profile(data, path=path)


def profile_entries() -> dict[str, Entry]:
    """Profile files by name with where each came from (shipped, checkout, user, env); the user's win by name."""
    return entries("profiles")


def list_profiles() -> list[str]:
    """Names of the known profiles (shipped and the user's own), sorted."""
    return list(profile_entries())
