"""The compiled build (``make compiled``) behaves exactly like the sources on the same seeded cases."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tooldispatch import _compiled

SCRIPT = Path(__file__).with_name("differential.py")
CASES = 1500


def _run(pythonpath: Path | None) -> str:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "7", str(CASES)], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.mark.skipif(not _compiled.extension_modules(), reason="no compiled modules here (`make compiled` builds them)")
def test_compiled_modules_give_the_same_results_as_the_sources(tmp_path: Path) -> None:
    sources = tmp_path / "src"
    shutil.copytree(_compiled.PACKAGE, sources / "tooldispatch", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    compiled = _run(None)
    plain = _run(sources)
    assert compiled.count("\n") == CASES
    assert compiled == plain


@pytest.mark.skipif(not _compiled.extension_modules(), reason="no compiled modules here (`make compiled` builds them)")
def test_thread_and_shortcut_equivalence_tests_pass_on_the_sources_too(tmp_path: Path) -> None:
    """The 8-thread, strict-lane-switch and shortcut-equivalence tests, which ``make test`` runs compiled, pass on
    the sources."""
    sources = tmp_path / "src"
    shutil.copytree(_compiled.PACKAGE, sources / "tooldispatch", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(sources)}
    where = subprocess.run(
        [sys.executable, "-c", "import tooldispatch.parsing.core as c; print(c.__file__)"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert where.stdout.strip() == str(sources / "tooldispatch" / "parsing" / "core.py")
    unit = Path(__file__).parents[2] / "unit" / "parsing"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
         str(unit / "test_threads.py"), str(unit / "test_common_shapes.py"), str(unit / "test_prose.py")],
        env=env, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]


def test_compiled_modules_are_in_use_when_built() -> None:
    """Where the build exists, the parser runs compiled (so the unit tests above test the build users get)."""
    import tooldispatch.parsing.core as core

    if _compiled.extension_modules():
        assert not str(core.__file__).endswith(".py")
