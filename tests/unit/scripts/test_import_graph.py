"""scripts/import-graph.py: the package has no import circle, and the map finds one where there is one."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

SCRIPT = Path(__file__).parents[3] / "scripts" / "import-graph.py"


def _graph() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def _package(root: Path, files: dict[str, str]) -> Path:
    package = root / "pkg"
    for name, text in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return package


def test_no_import_circle_between_the_modules_of_the_package() -> None:
    """No two modules of tooldispatch import each other, directly or through others, deferred imports included."""
    assert _graph().read_house().circles == []


def test_a_deferred_import_that_closes_a_circle_is_found(tmp_path: Path) -> None:
    """An import inside a function that leads back to its importer is a circle of the two modules."""
    package = _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from pkg.b import g\n\ndef f():\n    return g()\n",
            "b.py": "def g():\n    from pkg import a\n    return a\n",
            "c.py": "import pkg.a\n",
        },
    )
    assert _graph().read_house(package).circles == [["pkg.a", "pkg.b"]]


def test_rooms_and_arrows_follow_from_import_statements(tmp_path: Path) -> None:
    """Subpackages and top-level modules are rooms; ``from pkg.sub import mod`` is an arrow to that room."""
    package = _package(
        tmp_path,
        {
            "__init__.py": "",
            "types.py": "",
            "sub/__init__.py": "",
            "sub/mod.py": "from pkg import types\n",
            "top.py": "from pkg.sub import mod\nfrom . import types\n",
        },
    )
    house = _graph().read_house(package)
    assert house.rooms == ["__init__", "sub", "top", "types"]
    assert house.arrows == [("sub", "types"), ("top", "sub"), ("top", "types")]
    assert house.circles == []


def test_the_script_exits_1_on_a_circle_and_names_it(tmp_path: Path) -> None:
    """Run as a command, the map prints the circle and exits 1, so it can gate a build."""
    package = _package(tmp_path, {"__init__.py": "", "a.py": "import pkg.b\n", "b.py": "import pkg.a\n"})
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(package)], capture_output=True, text=True, check=False, timeout=60
    )
    assert proc.returncode == 1
    assert "import circles: 1\n  a.py <-> b.py\n" in proc.stdout
