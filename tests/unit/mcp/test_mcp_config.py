"""The mcpServers configuration: what it accepts and the one-line errors for what it does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooldispatch.errors import ConfigError
from tooldispatch.mcp.config import load_config, parse_config


def test_stdio_and_http_servers_are_read_in_file_order(tmp_path: Path) -> None:
    """command/args/env/cwd make a stdio server, url/headers a Streamable HTTP one; relative cwd is the file's."""
    path = tmp_path / "mcp.json"
    path.write_text(
        '{"mcpServers": {"time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"], '
        '"env": {"TZ": "UTC"}, "cwd": "work"}, "web": {"url": "http://127.0.0.1:9/mcp", '
        '"headers": {"Authorization": "Bearer s3cret"}, "trust": "annotations"}}}'
    )
    time, web = load_config(path)
    assert (time.name, time.transport, time.command, time.args, dict(time.env)) == (
        "time",
        "stdio",
        "mcp-server-time",
        ("--local-timezone", "UTC"),
        {"TZ": "UTC"},
    )
    assert time.cwd == str(tmp_path / "work")
    assert time.trust == "none"
    assert (web.transport, web.url, dict(web.headers), web.trust) == (
        "http",
        "http://127.0.0.1:9/mcp",
        {"Authorization": "Bearer s3cret"},
        "annotations",
    )
    assert web.identity == "http://127.0.0.1:9/mcp"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, 'expected {"mcpServers": {"<name>": {...}}} at the top level'),
        ({"mcpServers": {}}, "mcpServers is empty"),
        ({"mcpServers": {"a": {"command": "x", "url": "http://h"}}}, "give exactly one of 'command'"),
        ({"mcpServers": {"a": {"args": []}}}, "give exactly one of 'command'"),
        ({"mcpServers": {"a": {"command": "x", "args": "y"}}}, "mcpServers.a.args: must be a list of strings"),
        ({"mcpServers": {"a": {"url": "ftp://h"}}}, "mcpServers.a.url: must be an http:// or https:// URL"),
        ({"mcpServers": {"a": {"command": "x", "trust": "all"}}}, "mcpServers.a.trust: must be 'none'"),
        ({"mcpServers": {"a": {"command": "x", "colour": 1}}}, "mcpServers.a: unknown key(s) colour"),
        ({"mcpServers": {"a": {"command": "x", "tools": {"t": {"speed": 1}}}}}, "mcpServers.a.tools.t: unknown key"),
        ({"mcpServers": {"a": {"command": "x", "timeout_s": 0}}}, "mcpServers.a.timeout_s: must be a positive"),
        ({"mcpServers": {"a b": {"command": "x"}}}, "server names are 1-48 letters"),
    ],
)
def test_broken_configs_are_one_line_naming_the_key(data: object, message: str) -> None:
    """Each malformed entry is a single-line ConfigError that names the file and the key at fault."""
    with pytest.raises(ConfigError) as err:
        parse_config(data, origin="mcp.json")
    text = str(err.value)
    assert text.startswith("mcp.json: ")
    assert message in text
    assert "\n" not in text


def test_a_file_that_is_not_json_says_where(tmp_path: Path) -> None:
    """A JSON syntax error names the file, line and column."""
    path = tmp_path / "mcp.json"
    path.write_text('{"mcpServers": {\n  "a": {"command": "x",}\n}}')
    with pytest.raises(ConfigError, match=r"mcp\.json: not JSON \(.* at line 2, column 24\)"):
        load_config(path)


def test_a_missing_file_says_so(tmp_path: Path) -> None:
    """A path that does not exist is one line naming it."""
    with pytest.raises(ConfigError, match="cannot read the file"):
        load_config(tmp_path / "nope.json")
