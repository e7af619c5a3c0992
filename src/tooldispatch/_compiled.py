"""Which modules run compiled, and a guard against compiled modules older than their sources.

The parser and repair modules may be compiled with mypyc (``make compiled``, see ``setup.py``): each becomes
an extension module beside its ``.py`` file, and Python imports the extension first. In a source checkout an
edited ``.py`` file would then be silently ignored, so importing tooldispatch refuses to start on a stale
build and says how to fix it.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
_SUFFIXES = tuple(importlib.machinery.EXTENSION_SUFFIXES)
GROUP = "tooldispatch_compiled__mypyc"  # the shared library's name: setup.py's group name + mypyc's suffix


def extension_modules(package: Path = PACKAGE) -> list[tuple[Path, Path]]:
    """Every compiled module under ``package`` with its source: ``(extension, source)`` pairs."""
    pairs: list[tuple[Path, Path]] = []
    for extension in package.rglob("*.so"):
        name = extension.name
        for suffix in _SUFFIXES:
            if name.endswith(suffix):
                source = extension.with_name(name[: -len(suffix)] + ".py")
                if source.exists():
                    pairs.append((extension, source))
                break
    return sorted(pairs)


def stale(package: Path = PACKAGE) -> list[Path]:
    """The sources edited after their compiled module was built (their edits would not run).

    The code of every compiled module is in one shared library beside the package (``GROUP``); the small
    per-module extensions only load it, and a rebuild rewrites them only when they change.
    """
    shared = [p.stat().st_mtime for p in package.parent.glob(f"{GROUP}*") if p.name.endswith(_SUFFIXES)]
    built = max(shared, default=0.0)
    return [
        source
        for extension, source in extension_modules(package)
        if source.stat().st_mtime > max(built, extension.stat().st_mtime)
    ]


def in_checkout(package: Path = PACKAGE) -> bool:
    """True when the package runs from a source checkout (``src/tooldispatch`` next to ``pyproject.toml``)."""
    return package.parent.name == "src" and (package.parent.parent / "pyproject.toml").is_file()


def check(package: Path = PACKAGE) -> None:
    """Refuse a source checkout whose compiled modules are older than their sources.

    Raises:
        ImportError: naming the edited sources and the two ways out.
    """
    if not in_checkout(package):
        return
    edited = stale(package)
    if edited:
        shown = ", ".join(str(p.relative_to(package.parent)) for p in edited[:5])
        more = f" and {len(edited) - 5} more" if len(edited) > 5 else ""
        raise ImportError(
            f"the compiled modules are older than their sources ({shown}{more}), so the edits would not run: "
            "run `make compiled` to rebuild them, or `make clean-compiled` to run the sources"
        )


def compiled(module: str) -> bool:
    """True when ``module`` (already imported or importable) runs as a compiled extension."""
    spec = importlib.util.find_spec(module)
    origin = spec.origin if spec is not None else None
    return origin is not None and origin.endswith(_SUFFIXES)
