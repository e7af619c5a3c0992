"""Tool policy files: globs declare undeclared tools read-only, destructive or idempotent; bad files say why."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooldispatch.errors import ConfigError
from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.policy import ToolPolicy, ToolRule, load_policy
from tooldispatch.toolspec import ToolSpec, normalize_tools

_PATH = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
TOOLS = [
    {"type": "function", "function": {"name": "get_file", "parameters": _PATH}},
    {"type": "function", "function": {"name": "delete_file", "parameters": _PATH}},
]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_tool_given_as_a_dict_is_side_effecting() -> None:
    """Without metadata a tool gets the lossless level: the parser treats it as side-effecting."""
    assert [s.repair for s in normalize_tools(TOOLS).values()] == ["lossless", "lossless"]
    assert ToolSpec("x").repair == "lossless"


def test_the_first_matching_rule_decides_and_unmatched_tools_stay_side_effecting(tmp_path: Path) -> None:
    """Rules apply in file order; a tool no glob matches keeps its level."""
    policy = load_policy(
        _write(
            tmp_path,
            '[tools."get_*"]\nread_only = true\n\n[tools."*_file"]\ndestructive = true\n\n'
            '[tools."x?"]\nidempotent = true\n',
        )
    )
    assert policy.rules == (
        ToolRule("get_*", read_only=True, idempotent=True),
        ToolRule("*_file", destructive=True),
        ToolRule("x?", idempotent=True),
    )
    specs = policy.declare(normalize_tools([*TOOLS, {"name": "other"}]).values())
    assert [(s.name, s.repair) for s in specs] == [
        ("get_file", "bounded"),
        ("delete_file", "lossless"),
        ("other", "lossless"),
    ]
    assert policy.source == str(tmp_path / "policy.toml")


def test_globs_match_the_whole_name_case_sensitively() -> None:
    """``get_*`` matches get_file but neither GET_FILE nor forget_file."""
    rule = ToolRule("get_*", read_only=True)
    assert [rule.matches(n) for n in ("get_file", "GET_FILE", "forget_file")] == [True, False, False]


def test_a_declared_read_only_tool_takes_a_call_from_running_text_and_an_undeclared_one_does_not() -> None:
    """The same sentence gives a call for the declared read-only tool and an Ambiguous candidate otherwise."""
    text = "Let me look: get_file(path='/tmp/x')"
    undeclared = parse_tool_calls(text, TOOLS)
    assert (undeclared.calls, [c.bucket for c in undeclared.candidates]) == ((), ["Ambiguous"])
    declared = ToolPolicy.read_only("get_*", why="test").declare(normalize_tools(TOOLS).values())
    assert [(c.name, c.arguments) for c in parse_tool_calls(text, declared).calls] == [("get_file", {"path": "/tmp/x"})]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[tools."get_*"]\nread_only = "yes"\n', "read_only must be true or false, not 'yes'"),
        (
            '[tools."get_*"]\nreadonly = true\n',
            "unknown key(s) 'readonly'; use read_only, destructive, idempotent, polling",
        ),
        ('[tools."rm_*"]\nread_only = true\ndestructive = true\n', "says both read_only and destructive"),
        ('[tool."get_*"]\nread_only = true\n', "unknown top-level key(s) 'tool'"),
        ('tools = ["get_*"]\n', "'tools' must be a table"),
        ('[tools]\n"get_*" = true\n', "must be a table (read_only, destructive, idempotent, polling), not bool"),
        ('[tools."get_[ab"]\nread_only = true\n', "has a '[' with no closing ']'"),
        ('[tools." "]\nread_only = true\n', "a rule has an empty glob"),
        ("[tools\n", "is not valid TOML"),
    ],
)
def test_a_malformed_policy_says_what_to_fix(tmp_path: Path, text: str, message: str) -> None:
    """Each malformed file raises ConfigError naming the file, the rule and the fault."""
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_policy(path)
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_a_missing_policy_file_says_so(tmp_path: Path) -> None:
    """A path that does not exist is a ConfigError telling to pass a TOML file."""
    with pytest.raises(ConfigError, match="does not exist; pass --policy with a TOML file"):
        load_policy(tmp_path / "nope.toml")


def test_an_empty_policy_declares_nothing(tmp_path: Path) -> None:
    """A file with no rules leaves every tool as given."""
    policy = load_policy(_write(tmp_path, "# nothing declared\n"))
    specs = normalize_tools(TOOLS).values()
    assert policy.rules == () and policy.declare(specs) == tuple(specs)


def test_polling_is_read_and_asked_by_name(tmp_path: Path) -> None:
    """``polling = true`` marks a rule's tools as polled; other tools and unmatched names are not."""
    policy = load_policy(
        _write(tmp_path, '[tools."job_*"]\nread_only = true\npolling = true\n\n[tools."get_*"]\nread_only = true\n')
    )
    assert policy.rules[0] == ToolRule("job_*", read_only=True, idempotent=True, polling=True)
    assert [policy.polls(n) for n in ("job_status", "get_file", "other")] == [True, False, False]
