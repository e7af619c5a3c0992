"""The backend a profile describes, built for each kind of ``profiles.kinds``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tooldispatch.backends.base import Backend
from tooldispatch.backends.openai_compat import OpenAICompatBackend
from tooldispatch.errors import ConfigError
from tooldispatch.profiles.kinds import kind

if TYPE_CHECKING:
    from tooldispatch.profiles.schema import Profile


def tool_format_for(model: str | None) -> str | None:
    """The tool prompt format the model's manifest names (``None`` when the profile names no model)."""
    if not model:
        return None
    from tooldispatch.models import load_manifest

    return load_manifest(model.partition("@")[0]).tool_format


def client_base_url(profile: Profile, *, host: str | None = None, port: int | None = None) -> str:
    """The client URL of a server profile, with ``{host}`` / ``{port}`` filled in."""
    from tooldispatch.profiles.launch import client_host, fill

    if profile.client is None:
        raise ConfigError(f"profile {profile.name!r} has no [client] table")
    server = profile.server
    listen = host or (server.host if server else "127.0.0.1")
    chosen_port = port if port is not None else (server.port if server else 8000)
    return fill(profile.client.base_url, {"host": client_host(listen), "port": str(chosen_port)})


def backend_from_profile(profile: Profile | str, **overrides: Any) -> Backend:
    """Build the backend a profile describes; keyword arguments override the profile's settings.

    For ``openai_compat`` profiles the overrides are ``OpenAICompatBackend`` arguments (``base_url``,
    ``parse``, ``model``, ``timeout_s``, ...) plus ``port`` and ``host`` to point at another server
    instance. For ``llamacpp`` profiles they are ``LlamaCppBackend`` arguments, with ``model`` (or
    ``model_path``) replacing the profile's ``NAME@QUANT``; ``prefix_cache_mb`` (also a key of the profile's
    ``[llamacpp]`` table) bounds the prefix-state cache, ``0`` turns it off.

    Raises:
        ConfigError: the profile is invalid, or a required setting (an API key) is missing.
    """
    from tooldispatch.profiles.schema import load_profile

    prof = load_profile(profile) if isinstance(profile, str) else profile
    if kind(prof.backend).in_process:
        from tooldispatch.backends.llamacpp import LlamaCppBackend

        settings = {**prof.llamacpp, **overrides}
        model_path = settings.pop("model_path", None) or settings.pop("model", None) or prof.model
        settings.pop("model", None)
        if not model_path:
            raise ConfigError(f"{prof.path}: a llamacpp profile needs 'model' (NAME@QUANT) or a model override")
        backend: Backend = LlamaCppBackend(model_path, **settings)
        return backend
    return server_backend(prof, **overrides)


def server_backend(prof: Profile, **overrides: Any) -> OpenAICompatBackend:
    """The backend of a server profile (``backend_from_profile``'s overrides).

    Raises:
        ConfigError: the profile runs its model in process, or a required setting (an API key) is missing.
    """
    client = prof.client
    if client is None:
        raise ConfigError(f"profile {prof.name!r} runs its model in process; it names no server")
    host = overrides.pop("host", None)
    port = overrides.pop("port", None)
    openai_settings: dict[str, Any] = {
        "base_url": client_base_url(prof, host=host, port=port),
        "model": client.served_model,
        "dialect": client.dialect,
        "parse": client.parse,
        "api_key_env": client.api_key_env,
        "timeout_s": client.timeout_s,
        "max_retries": client.max_retries,
        "extra_body": dict(client.extra_body),
        "provider": dict(client.provider) if client.provider else None,
        "headers": dict(client.headers),
        "profile": prof.name,
    }
    tool_format = tool_format_for(prof.model)
    if tool_format:
        openai_settings["tool_format"] = tool_format
    openai_settings.update(overrides)
    return OpenAICompatBackend(**openai_settings)
