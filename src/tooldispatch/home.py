"""The per-user home: where runs are kept and what ``tooldispatch config`` sets (XDG base directories).

- data: ``$XDG_DATA_HOME/tooldispatch`` (``~/.local/share/tooldispatch``): ``state.db``, the default store
  of ``run`` and ``chat`` (every run is kept, ``tooldispatch logs`` lists them), and ``worlds/``, one demo
  world file per session, so ``chat -c`` and ``approvals approve`` act on the world the run used.
- cache: ``$XDG_CACHE_HOME/tooldispatch/models`` (``~/.cache/tooldispatch/models``): the one model cache of
  the user, shared by every folder ``tooldispatch`` runs in, the benchmarks and the proxy; moved by
  ``TOOLDISPATCH_MODELS_DIR`` or the ``models_dir`` key (:func:`models_dir`).
- config: ``$XDG_CONFIG_HOME/tooldispatch/`` (``~/.config/tooldispatch/``): ``models/`` and ``profiles/``, the
  user's own model manifests and deployment profiles (they win over the shipped ones of the same name, see
  :mod:`tooldispatch.packaged`), and ``config.toml``, defaults for the options of ``run`` and ``chat`` and model
  aliases::

      model = "qwen-small"
      n_ctx = 8192
      temperature = 0.2

      [aliases]
      qwen-small = "qwen2.5-coder-0.5b-instruct@Q4_K_M"

An option given on the command line wins over the config file, which wins over the built-in default.
Nothing here is cached: each call reads the environment and the file again.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooldispatch.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Key:
    """One settable key of ``config.toml``."""

    kind: type
    help: str


KEYS: dict[str, Key] = {
    "model": Key(str, "default model of run and chat (NAME@QUANT, an alias, or a served model id)"),
    "profile": Key(str, "default deployment profile (tooldispatch profiles)"),
    "n_ctx": Key(int, "context length in tokens (llamacpp; 0: the model's own, capped at 16,384)"),
    "temperature": Key(float, "sampling temperature (0: greedy)"),
    "seed": Key(int, "sampling seed"),
    "max_tokens": Key(int, "completion tokens per model turn"),
    "max_turns": Key(int, "model turns per task"),
    "threads": Key(int, "llama.cpp CPU threads (0: its default)"),
    "prefix_cache_mb": Key(
        int, "megabytes of saved llama.cpp context states per in-process model (0: off; default 1024)"
    ),
    "constrained": Key(str, "grammar-constrained decoding: off, on or required"),
    "store": Key(str, "the store runs are kept in (a SQLite file or a postgresql:// URL)"),
    "models_dir": Key(str, "the model cache folder (TOOLDISPATCH_MODELS_DIR wins over it)"),
}
"""Every key ``tooldispatch config set`` accepts, with its type."""


def data_dir() -> Path:
    """``$XDG_DATA_HOME/tooldispatch``, or ``~/.local/share/tooldispatch``."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "tooldispatch"


def config_dir() -> Path:
    """``$XDG_CONFIG_HOME/tooldispatch``, or ``~/.config/tooldispatch``."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "tooldispatch"


def config_path() -> Path:
    """``$XDG_CONFIG_HOME/tooldispatch/config.toml``, or ``~/.config/tooldispatch/config.toml``."""
    return config_dir() / "config.toml"


def user_models_dir() -> Path:
    """The user's own model manifests (``models add`` writes there): ``config_dir()/models``."""
    return config_dir() / "models"


def user_profiles_dir() -> Path:
    """The user's own deployment profiles: ``config_dir()/profiles``."""
    return config_dir() / "profiles"


def models_dir() -> Path:
    """The model cache: ``TOOLDISPATCH_MODELS_DIR``, else ``models_dir`` from the config, else
    ``$XDG_CACHE_HOME/tooldispatch/models`` (``~/.cache/tooldispatch/models``).

    The only place the cache folder is decided: pulls, quantizations, ``run``, the benchmarks, the proxy and
    the profiles' ``{models}`` placeholder all go through it.
    """
    env = os.environ.get("TOOLDISPATCH_MODELS_DIR")
    if env:
        return Path(env).expanduser()
    configured = load_config().get("models_dir")
    if configured:
        return Path(str(configured)).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tooldispatch" / "models"


def default_store() -> str:
    """The store ``run`` and ``chat`` keep their runs in: ``store`` from the config, else the home's file."""
    configured = load_config().get("store")
    return str(configured) if configured else str(data_dir() / "state.db")


def world_path(session_id: str) -> Path:
    """The demo world file of one session (created by the first run of the session)."""
    return data_dir() / "worlds" / f"{session_id}.db"


def load_config(path: Path | None = None) -> dict[str, Any]:
    """The config file as a dict (empty when there is none).

    Raises:
        ConfigError: the file is not TOML, or holds an unknown key or a value of the wrong type.
    """
    path = path or config_path()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}; fix or remove the file") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}); fix it or run `tooldispatch config unset KEY`") from None
    for key, value in data.items():
        if key == "aliases":
            if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
                raise ConfigError(f"{path}: [aliases] must map names to model strings")
            continue
        if key not in KEYS:
            raise ConfigError(f"{path}: unknown key {key!r}; known keys: {', '.join(KEYS)}, [aliases]")
        _check(key, value, path)
    return data


def _check(key: str, value: Any, where: Path | str) -> None:
    kind = KEYS[key].kind
    ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok = True
    if not ok:
        raise ConfigError(f"{where}: {key} must be {kind.__name__}, not {value!r}")
    if key == "constrained" and value not in ("off", "on", "required"):
        raise ConfigError(f"{where}: constrained must be off, on or required, not {value!r}")
    if key == "models_dir" and not Path(value).expanduser().is_absolute():
        raise ConfigError(f"{where}: models_dir must be an absolute path (or start with ~), not {value!r}")


def parse_value(key: str, text: str) -> Any:
    """A value given on the command line, as the key's type.

    Raises:
        ConfigError: the key is unknown or the text is not of its type.
    """
    if key not in KEYS:
        raise ConfigError(f"unknown key {key!r}; known keys: {', '.join(KEYS)}")
    kind = KEYS[key].kind
    try:
        value: Any = kind(text)
    except ValueError:
        raise ConfigError(f"{key} must be {kind.__name__}, not {text!r}") from None
    _check(key, value, "config")
    return value


def _toml_value(value: Any) -> str:
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    return repr(value)


def save_config(data: dict[str, Any], path: Path | None = None) -> Path:
    """Write ``data`` (keys of :data:`KEYS` and an ``aliases`` table) as the config file; returns its path."""
    path = path or config_path()
    lines = [f"{key} = {_toml_value(data[key])}" for key in KEYS if key in data]
    aliases = data.get("aliases") or {}
    if aliases:
        lines += ["", "[aliases]"] + [f"{_toml_value(name)} = {_toml_value(aliases[name])}" for name in sorted(aliases)]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".toml.tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)
    return path


def resolve_model(name: str | None, config: dict[str, Any]) -> str | None:
    """A model name with its alias (from ``[aliases]``) expanded; ``None`` stays ``None``."""
    if name is None:
        return None
    aliases = config.get("aliases") or {}
    return str(aliases.get(name, name))
