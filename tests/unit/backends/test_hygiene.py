"""Project rules the backends must keep: no vLLM import anywhere, no secrets in wire fixtures."""

from __future__ import annotations

import ast
import json
from pathlib import Path

SRC = Path(__file__).resolve().parents[3] / "src" / "tooldispatch"
WIRE = Path(__file__).resolve().parents[2] / "fixtures" / "wire"


def test_nothing_imports_vllm() -> None:
    """No module of the package imports ``vllm``; the [vllm] extra is only for users who run it natively."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.relative_to(SRC)}: {n}" for n in names if n.split(".")[0] == "vllm"]
    assert offenders == []


def test_wire_fixtures_hold_no_keys_and_name_their_source() -> None:
    """Every wire fixture says where it came from and carries no API key or Authorization header."""
    fixtures = sorted(WIRE.rglob("*.json"))
    assert len(fixtures) == 36
    for path in fixtures:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text)
        assert data["source"].startswith(("recorded from ", "written from ")), path.name
        for marker in ("sk-or-", "Bearer ", "authorization", "api_key"):
            assert marker not in text, f"{path.name} contains {marker!r}"
