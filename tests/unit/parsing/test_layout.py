"""The parser's map: imports run one way, modules stay small, no module-level store of parse results."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parents[3] / "src" / "tooldispatch"


def _modules(*packages: str) -> list[Path]:
    return sorted(p for package in packages for p in (SRC / package).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_repair_never_imports_parsing() -> None:
    """parsing/ uses repair/, never the other way round (no import that runs back up)."""
    back = {
        str(p.relative_to(SRC)): sorted(m for m in _imports(p) if m.startswith("tooldispatch.parsing"))
        for p in _modules("repair")
    }
    assert {k: v for k, v in back.items() if v} == {}


def test_no_parser_or_repair_module_is_over_800_lines() -> None:
    """Every module of parsing/ and repair/ stays under 800 lines."""
    long = {
        str(p.relative_to(SRC)): n
        for p in _modules("parsing", "repair")
        if (n := len(p.read_text().splitlines())) > 800
    }
    assert long == {}


def test_no_strict_result_store_is_left() -> None:
    """The one-slot store that carried strict results between stages is gone from every module."""
    text = "\n".join(p.read_text(encoding="utf-8") for p in _modules("parsing", "repair"))
    assert "LAST_STRICT" not in text and "forget_strict" not in text and "remember_value" not in text
