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
