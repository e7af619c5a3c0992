"""The guard against compiled modules older than their sources, on a fake checkout."""

from __future__ import annotations

import importlib.machinery
import os
from pathlib import Path

import pytest

from tooldispatch import _compiled

SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def _checkout(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    package = tmp_path / "src" / "tooldispatch"
    (package / "parsing").mkdir(parents=True)
    for name in ("types", "parsing/core", "parsing/lane"):
        (package / f"{name}.py").write_text("")
        (package / f"{name}{SUFFIX}").write_bytes(b"")
    (package / "parsing" / f"orphan{SUFFIX}").write_bytes(b"")  # no source beside it: not a compiled module
    (package / "dispatch.py").write_text("")  # a source without an extension: never compiled
    return package


def _age(path: Path, seconds: float) -> None:
    stamp = path.stat().st_mtime - seconds
    os.utime(path, (stamp, stamp))


def test_pairs_every_extension_with_its_source(tmp_path: Path) -> None:
    package = _checkout(tmp_path)
    pairs = _compiled.extension_modules(package)
    assert [source.relative_to(package).as_posix() for _, source in pairs] == [
        "parsing/core.py",
        "parsing/lane.py",
        "types.py",
    ]


def test_a_source_edited_after_the_build_is_stale(tmp_path: Path) -> None:
    package = _checkout(tmp_path)
    for extension, _ in _compiled.extension_modules(package):
        _age(extension, 100)
    _age(package / "types.py", 200)  # older than its build
    assert _compiled.stale(package) == [package / "parsing" / "core.py", package / "parsing" / "lane.py"]
    expected = (
        r"^the compiled modules are older than their sources "
        r"\(tooldispatch/parsing/core.py, tooldispatch/parsing/lane.py\), so the edits would not run: "
        r"run `make compiled` to rebuild them, or `make clean-compiled` to run the sources$"
    )
    with pytest.raises(ImportError, match=expected):
        _compiled.check(package)


def test_the_shared_library_dates_the_build(tmp_path: Path) -> None:
    """A rebuild rewrites the shared library, not the per-module extensions that did not change."""
    package = _checkout(tmp_path)
    for extension, _ in _compiled.extension_modules(package):
        _age(extension, 100)
    (package.parent / f"{_compiled.GROUP}{SUFFIX}").write_bytes(b"")  # built now, after every source
    assert _compiled.stale(package) == []
    _compiled.check(package)


def test_an_installed_package_is_not_checked(tmp_path: Path) -> None:
    """Outside a checkout (no src/ next to pyproject.toml) the files' times say nothing about edits."""
    package = _checkout(tmp_path)
    (tmp_path / "pyproject.toml").unlink()
    for extension, _ in _compiled.extension_modules(package):
        _age(extension, 100)
    assert _compiled.stale(package)
    _compiled.check(package)


def test_says_whether_a_module_runs_compiled() -> None:
    assert _compiled.compiled("tooldispatch.errors") is False  # never compiled
    assert _compiled.compiled("tooldispatch.parsing.core") is bool(_compiled.extension_modules())
