"""The per-user home: XDG paths, ``tooldispatch config`` and its checks, and that tests never touch the real home."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tooldispatch.home import config_path, data_dir, default_store, world_path

Cli = Callable[..., Any]  # the `cli` fixture of tests/conftest.py


def test_paths_follow_xdg_variables() -> None:
    """Data under $XDG_DATA_HOME/tooldispatch, config under $XDG_CONFIG_HOME/tooldispatch (the suite's temp dirs)."""
    data, config = Path(os.environ["XDG_DATA_HOME"]), Path(os.environ["XDG_CONFIG_HOME"])
    assert data_dir() == data / "tooldispatch"
    assert config_path() == config / "tooldispatch" / "config.toml"
    assert default_store() == str(data / "tooldispatch" / "state.db")
    assert world_path("s-1") == data / "tooldispatch" / "worlds" / "s-1.db"
    assert not str(data).startswith(str(Path.home() / ".local"))


def test_config_set_get_unset(cli: Cli) -> None:
    """`config set` writes a typed value that `get` prints; `unset` removes it (get then exits 1)."""
    assert cli("config", "set", "n_ctx", "8192").out == f"n_ctx = 8192 in {config_path()}\n"
    assert cli("config", "get", "n_ctx").out == "8192\n"
    assert config_path().read_text() == "n_ctx = 8192\n"
    assert cli("config", "set", "model", 'my "model"').code == 0
    assert cli("config", "get", "model").out == 'my "model"\n'
    assert cli("config", "unset", "n_ctx").code == 0
    assert cli("config", "get", "n_ctx").code == 1
    assert cli("config", "get", "store").out == f"{default_store()}\n"


def test_config_refuses_unknown_keys_and_wrong_types(cli: Cli) -> None:
    """An unknown key or a value of the wrong type is one error line, and nothing is written."""
    bad_key = cli("config", "set", "colour", "blue")
    assert (bad_key.code, bad_key.err.startswith("error: unknown key 'colour'; known keys: model, profile")) == (
        2,
        True,
    )
    bad_type = cli("config", "set", "seed", "many")
    assert (bad_type.code, bad_type.err) == (2, "error: seed must be int, not 'many'\n")
    assert not config_path().exists()


def test_a_broken_config_file_is_one_line_naming_it(cli: Cli) -> None:
    """A config file that is not TOML makes run and config fail with one line naming the file."""
    config_path().parent.mkdir(parents=True)
    config_path().write_text("model = \n")
    ran = cli("config", "list")
    assert ran.code == 2
    assert ran.err.startswith(f"error: {config_path()} is not valid TOML (")
    run = cli("run", "hello")
    assert run.code == 2
    assert run.err.startswith(f"error: {config_path()} is not valid TOML (")


def test_the_model_cache_is_per_user_and_can_be_moved(cli: Cli, tmp_path: Path, monkeypatch: Any) -> None:
    """The cache is $XDG_CACHE_HOME/tooldispatch/models; the models_dir key moves it; TOOLDISPATCH_MODELS_DIR wins."""
    from tooldispatch.home import models_dir
    from tooldispatch.models import cache_dir

    monkeypatch.delenv("TOOLDISPATCH_MODELS_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    assert models_dir() == cache_dir() == tmp_path / "xdg-cache" / "tooldispatch" / "models"
    assert cli("config", "set", "models_dir", str(tmp_path / "big-disk")).code == 0
    assert cache_dir() == tmp_path / "big-disk"
    shown = cli("config", "path")
    assert shown.out.splitlines()[-1] == f"cache:    {tmp_path / 'big-disk'}"
    monkeypatch.setenv("TOOLDISPATCH_MODELS_DIR", str(tmp_path / "env"))
    assert cache_dir() == tmp_path / "env"


def test_a_relative_models_dir_is_refused(cli: Cli) -> None:
    """A relative models_dir would depend on the working folder: refused, and nothing is written."""
    ran = cli("config", "set", "models_dir", "models/cache")
    assert (ran.code, ran.err) == (
        2,
        "error: config: models_dir must be an absolute path (or start with ~), not 'models/cache'\n",
    )
    assert not config_path().exists()


def test_prefix_cache_bound_comes_from_the_option_then_the_config() -> None:
    """``--prefix-cache-mb`` wins, then config's ``prefix_cache_mb``; with neither the backend's default applies."""
    from tooldispatch.cli.session import prefix_cache_setting, resolve
    from tooldispatch.home import config_path

    assert prefix_cache_setting(None) is None
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("prefix_cache_mb = 256\n", encoding="utf-8")
    assert (prefix_cache_setting(None), prefix_cache_setting(0)) == (256, 0)
    assert (resolve().prefix_cache_mb, resolve(prefix_cache_mb=64).prefix_cache_mb) == (256, 64)
