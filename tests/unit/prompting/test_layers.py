"""``prompting/`` sits below ``models/``: it imports nothing from it, and the shared Reasoning lives in ``types``."""

from __future__ import annotations

import ast
from pathlib import Path

import tooldispatch.prompting
from tooldispatch import types
from tooldispatch.models import manifest


def _imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            out.add(node.module)
    return out


def test_prompting_imports_nothing_from_models() -> None:
    """No module of prompting/ imports tooldispatch.models, so the two folders depend one way."""
    folder = Path(tooldispatch.prompting.__file__).parent
    modules = sorted(folder.glob("*.py"))
    assert modules
    upward = {
        path.name: sorted(
            m for m in _imported(path) if m == "tooldispatch.models" or m.startswith("tooldispatch.models.")
        )
        for path in modules
    }
    assert {name: found for name, found in upward.items() if found} == {}


def test_manifest_reasoning_is_the_shared_type() -> None:
    """A manifest's reasoning markers are the Reasoning of tooldispatch.types, which prompting reads."""
    assert manifest.Reasoning is types.Reasoning
    assert types.Reasoning("<think>", "</think>") == types.Reasoning(
        open="<think>", close="</think>", starts_open=False
    )
