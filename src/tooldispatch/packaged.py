"""The files tooldispatch ships, and the user's own beside them.

The package carries its model manifests (``data/models/*.toml``), its deployment profiles
(``data/profiles/*.toml``) and the calibration text (``data/models/calibration/``), read with
``importlib.resources``, so an installed wheel has them wherever it runs. Each kind is looked up in two
folders, the later winning by name:

1. the shipped folder, or the folder ``TOOLDISPATCH_MANIFESTS_DIR`` / ``TOOLDISPATCH_CONFIGS_DIR`` names
   instead of it;
2. the user's own: ``$XDG_CONFIG_HOME/tooldispatch/models/`` and ``.../profiles/`` (:mod:`tooldispatch.home`).

Each entry says where it came from: ``shipped`` (inside the installed package), ``checkout`` (the shipped
files of a source checkout, ``src/tooldispatch/data/``, run with ``pip install -e`` or ``PYTHONPATH=src``),
``user``, or ``env`` (the folder of the environment variable).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Literal

from tooldispatch._compiled import in_checkout
from tooldispatch.errors import ConfigError

Kind = Literal["models", "profiles"]

ENV_VARS: dict[Kind, str] = {"models": "TOOLDISPATCH_MANIFESTS_DIR", "profiles": "TOOLDISPATCH_CONFIGS_DIR"}
"""The variable that replaces the shipped folder of each kind."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One manifest or profile file.

    Attributes:
        name: the file's stem (the model id or the profile name).
        path: the file.
        origin: ``shipped``, ``checkout``, ``user`` or ``env``.
    """

    name: str
    path: Path
    origin: str


def data_dir() -> Path:
    """The package's ``data`` folder.

    Raises:
        ConfigError: the package is not installed as plain files (a zip import), so its data has no path.
    """
    root = resources.files("tooldispatch") / "data"
    if not isinstance(root, Path):
        raise ConfigError(f"tooldispatch's data ({root}) is not a folder; install the package with pip, not as a zip")
    return root


def shipped_origin() -> str:
    """``checkout`` when the package runs from a source tree (``src/tooldispatch`` beside ``pyproject.toml``),
    else ``shipped``."""
    return "checkout" if in_checkout(data_dir().parent) else "shipped"


def calibration_text() -> Path:
    """The calibration text ``llama-imatrix`` reads (``data/models/calibration/calibration.txt``)."""
    return data_dir() / "models" / "calibration" / "calibration.txt"


def folders(kind: Kind) -> list[tuple[str, Path]]:
    """The folders one kind is looked up in, as ``(origin, folder)``, the last winning by name."""
    from tooldispatch.home import user_models_dir, user_profiles_dir

    env = os.environ.get(ENV_VARS[kind])
    base = ("env", Path(env).expanduser()) if env else (shipped_origin(), data_dir() / kind)
    return [base, ("user", user_models_dir() if kind == "models" else user_profiles_dir())]


def entries(kind: Kind) -> dict[str, Entry]:
    """Every ``*.toml`` of one kind by name, sorted; a user's file wins over a shipped one of the same name."""
    found: dict[str, Entry] = {}
    for origin, folder in folders(kind):
        if folder.is_dir():
            found.update({p.stem: Entry(p.stem, p, origin) for p in sorted(folder.glob("*.toml"))})
    return dict(sorted(found.items()))


def where(kind: Kind) -> str:
    """The folders of one kind, for error messages: ``A or B``."""
    return " or ".join(str(folder) for _, folder in folders(kind))


def legend(kind: Kind) -> str:
    """Where each origin of a listing is: ``shipped: PATH; user: PATH``."""
    return "; ".join(f"{origin}: {folder}" for origin, folder in folders(kind))
