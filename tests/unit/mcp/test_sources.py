"""Tool sources: Python registries by file or module, the demo, merging with prefixes, one-line import errors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tooldispatch.cli import app
from tooldispatch.dispatch import Registry
from tooldispatch.errors import ConfigError
from tooldispatch.sources import load_registry, load_sources, merge
from tooldispatch.store import Store

TOOLS = '''
from tooldispatch.dispatch import Registry

registry = Registry()


@registry.tool(read_only=True)
def get_order(order_id: str) -> dict:
    """Look an order up.

    Args:
        order_id: the order.
    """
    return {"id": order_id}


def make() -> Registry:
    return registry


LIMIT = 3
'''


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_a_file_registry_loads_by_attr_or_by_default_name(tmp_path: Path) -> None:
    """file.py:attr names a Registry or a factory; file.py alone takes its `registry`."""
    path = _write(tmp_path, "mytools.py", TOOLS)
    assert load_registry(f"{path}:registry").names == ["get_order"]
    assert load_registry(f"{path}:make").names == ["get_order"]
    assert load_registry(str(path)).names == ["get_order"]


def test_a_module_registry_loads_by_package_path() -> None:
    """package.module:attr imports the module; here the demo world's factory needs its argument, so it is refused."""
    with pytest.raises(ConfigError, match=r"build_registry\(\) raised: TypeError"):
        load_registry("tooldispatch.tools.demo:build_registry")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("def broken(:\n    pass\n", r"bad\.py:1: SyntaxError: "),
        (
            "import os\nraise RuntimeError('no database configured')\n",
            r"bad\.py:2: RuntimeError: no database configured",
        ),
        (
            "def make():\n    raise ValueError('missing API key')\n",
            r"make\(\) raised: .*bad\.py:2: ValueError: missing API key",
        ),
        ("import not_a_module_anywhere\n", r"bad\.py:1: ModuleNotFoundError: No module named 'not_a_module_anywhere'"),
    ],
)
def test_fault_6_tools_module_that_fails_to_import_is_one_line(tmp_path: Path, body: str, expected: str) -> None:
    """Fault 6 (issue 16): a SyntaxError, an exception at import or a raising factory is one line: file, line, error."""
    path = _write(tmp_path, "bad.py", body)
    with pytest.raises(ConfigError) as err:
        load_registry(f"{path}:make")
    text = str(err.value)
    assert "\n" not in text
    assert text.startswith(f"--tools '{path}:make': ")
    assert __import__("re").search(expected, text), text


def test_fault_6_on_the_command_line_is_one_line_without_traceback(tmp_path: Path) -> None:
    """Fault 6 (issue 16) through the CLI: the broken module is reported as one error line, exit code 2."""
    path = _write(tmp_path, "bad.py", "x = 1\nraise RuntimeError('boom at import')\n")
    result = CliRunner().invoke(app, ["mcp", "serve", "--tools", f"{path}:registry", "--store", str(tmp_path / "s.db")])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert lines == [f"error: --tools '{path}:registry': {path}:2: RuntimeError: boom at import"]


def test_missing_targets_say_what_to_fix(tmp_path: Path) -> None:
    """A missing file, module or attribute, and a value that is no registry, each get their own message."""
    path = _write(tmp_path, "mytools.py", TOOLS)
    with pytest.raises(ConfigError, match=r"no file .*nope\.py; check the path"):
        load_registry(str(tmp_path / "nope.py"))
    with pytest.raises(ConfigError, match="no module named 'no_such_pkg'"):
        load_registry("no_such_pkg.mod:reg")
    with pytest.raises(ConfigError, match="has no attribute 'other'"):
        load_registry(f"{path}:other")
    with pytest.raises(ConfigError, match="is not a Registry nor a function returning one"):
        load_registry(f"{path}:LIMIT")


def _reg(*names: str, compensate: dict[str, str] | None = None) -> Registry:
    reg = Registry()
    for name in names:
        inverse = (compensate or {}).get(name)
        reg.register(
            name,
            lambda **kw: kw,
            schema={"type": "object", "properties": {}},
            description=f"{name} tool",
            destructive=True if inverse else None,
            compensate=inverse,
        )
    return reg


def test_shared_names_are_prefixed_by_source_and_said_once() -> None:
    """A name two sources share becomes <source>__<name> in both; others keep theirs; compensations follow."""
    merged, origin, renamed = merge(
        [("a", _reg("undo", "book", compensate={"book": "undo"})), ("b", _reg("undo", "ping"))]
    )
    assert merged.names == ["a__undo", "book", "b__undo", "ping"]
    assert merged["book"].compensate == "a__undo"
    assert origin["b__undo"] == ("b", "undo")
    assert renamed == "a__undo (a), b__undo (b)"


def test_load_sources_merges_demo_and_a_file_and_notes_renames_once(tmp_path: Path) -> None:
    """demo plus a file with a tool of the same name: both prefixed, one note line, the demo world kept."""
    path = _write(tmp_path, "mytools.py", TOOLS)
    with load_sources(["demo", f"{path}:registry"], store=Store(":memory:")) as sources:
        assert "demo__get_order" in sources.registry
        assert "mytools__get_order" in sources.registry
        assert sources.world is not None
        renames = [n for n in sources.notes if "prefixed by their source" in n]
        assert renames == [
            "tool names found in more than one source are prefixed by their source: "
            "demo__get_order (demo), mytools__get_order (mytools)"
        ]


def test_merged_tools_keep_what_they_act_on() -> None:
    """A merged registry keeps each tool's acts_on, so replays end the same way through the command line."""
    from tooldispatch.tools.demo import DemoWorld, build_registry

    merged, _, _ = merge([("demo", build_registry(DemoWorld.seed()))])
    assert {t.name: t.acts_on for t in merged if t.acts_on} == {
        "assign_driver": ("order_id",),
        "unassign_driver": ("order_id",),
        "cancel_order": ("order_id",),
    }
