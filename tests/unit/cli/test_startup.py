"""Item "fast and conventional": what ``tooldispatch`` imports at start, ``--version``, completion, help text."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from tooldispatch.cli import app, command

Cli = Callable[..., Any]  # the `cli` fixture of conftest.py
HEAVY = ("openai", "llama_cpp", "rich", "matplotlib", "starlette", "uvicorn", "httpx2", "jsonschema", "mcp")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys\nprint('--modules--', *sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "NO_COLOR": "1"},
    ).stdout
    return set(out.split("--modules--")[-1].split())


def test_import_of_the_cli_leaves_heavy_libraries_out() -> None:
    """Importing tooldispatch.cli imports none of openai, llama_cpp, rich, matplotlib, the servers or the parser."""
    loaded = _modules_after("import tooldispatch.cli")
    assert sorted(m for m in HEAVY if m in loaded) == []
    assert "tooldispatch.parsing" not in loaded
    assert "tooldispatch.dispatch" not in loaded


def test_root_help_builds_no_command_and_imports_nothing_heavy() -> None:
    """`tooldispatch --help` lists the commands without importing what any of them needs."""
    loaded = _modules_after(
        "import sys\nfrom tooldispatch.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    )
    assert sorted(m for m in HEAVY if m in loaded) == []


def test_version(cli: Cli) -> None:
    """`--version` prints the package's version and exits 0."""
    ran = cli("--version")
    assert ran.code == 0
    assert re.fullmatch(r"tooldispatch \d+\.\d+\.\d+\S*\n", ran.out)


def _all_paths() -> list[list[str]]:
    """Every command path: ['run'], ['trace', 'list'], ... (built from the lazy root)."""
    root = command()
    paths: list[list[str]] = []

    def walk(cmd: object, prefix: list[str]) -> None:
        sub = getattr(cmd, "commands", None)
        if sub is None:
            paths.append(prefix)
            return
        paths.append(prefix)
        for name in list(sub):
            walk(sub[name], [*prefix, name])

    for name in list(root.commands):
        walk(root.commands[name], [name])
    return paths


def test_every_help_names_values_without_type_tags(cli: Cli) -> None:
    """No --help shows a Python type tag (<str>, <int>, list[...]) or an argument in braces ({task})."""
    paths = _all_paths()
    assert len(paths) > 30
    for path in paths:
        ran = cli(*path, "--help")
        assert ran.code == 0, (path, ran.err)
        tags = re.findall(r"<(?:str|int|float|bool|Path|list\[[^>]*\])>|\{[a-z_]+\}|list\[", ran.out)
        assert tags == [], (path, tags)


def test_run_help_shows_plain_metavars(cli: Cli) -> None:
    """`run --help` writes its argument as TASK in the usage line and options as --model MODEL."""
    ran = cli("run", "--help")
    assert "Usage: tooldispatch run [OPTIONS] TASK" in ran.out
    assert "--model MODEL" in ran.out


def test_shell_completion_completes_command_names() -> None:
    """Bash completion (typer's own) completes `tooldispatch tr` to `trace`."""
    env = {**os.environ, "_TOOLDISPATCH_COMPLETE": "complete_bash", "COMP_WORDS": "tooldispatch tr", "COMP_CWORD": "1"}
    done = subprocess.run(
        [sys.executable, "-c", "from tooldispatch.cli import main; main()"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert done.stdout.split() == ["trace"]


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_show_completion_prints_a_script(shell: str) -> None:
    """`--show-completion SHELL` prints the completion script that names the command's variable."""
    done = subprocess.run(
        [sys.executable, "-c", f"from tooldispatch.cli import main; main(['--show-completion', {shell!r}])"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert "_TOOLDISPATCH_COMPLETE" in done.stdout


def test_the_typer_app_still_drives_every_area() -> None:
    """The typer app others import (tests, plugins) still holds every area's commands."""
    names = {c.name or c.callback.__name__ for c in app.registered_commands if c.callback}
    groups = {g.name for g in app.registered_groups}
    assert {"run", "chat", "parse", "serve", "report"} <= names | {n.replace("_", "-") for n in names}
    assert {"trace", "approvals", "models", "bench", "store", "proxy", "mcp"} <= groups
