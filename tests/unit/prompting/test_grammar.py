"""GBNF generation from tool schemas: exact grammar text per format and per schema construct."""

from __future__ import annotations

import pytest

from tooldispatch.errors import ConfigError
from tooldispatch.models import Reasoning
from tooldispatch.prompting import gbnf_literal, tool_call_grammar
from tooldispatch.toolspec import ToolSpec

STRING_RULES = (
    'string ::= "\\"" char{0,64} "\\""\n'
    'char ::= [^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])\n'
)
WEATHER = ToolSpec(
    "get_weather",
    "",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["c", "f"]},
            "days": {"type": "integer"},
        },
        "required": ["city"],
    },
)
PING = ToolSpec("ping", "", {"type": "object", "properties": {}})


def test_hermes_grammar_exact() -> None:
    """Hermes: one <tool_call> block; required key first, optional keys in order; enum as literals."""
    assert tool_call_grammar([WEATHER, PING], "hermes", tool_choice="required") == (
        'root ::= "<tool_call>\\n" call "\\n</tool_call>"\n'
        'get-weather-args ::= "{" "\\"city\\": " string (", " "\\"unit\\": " ("\\"c\\"" | "\\"f\\""))? '
        '(", " "\\"days\\": " integer)? "}"\n'
        'call-get-weather ::= "{\\"name\\": \\"get_weather\\", \\"arguments\\": " get-weather-args "}"\n'
        'call-ping ::= "{\\"name\\": \\"ping\\", \\"arguments\\": " "{}" "}"\n'
        "call ::= call-get-weather | call-ping\n" + STRING_RULES + 'integer ::= "-"? ("0" | [1-9] [0-9]*)\n'
    )


def test_pythonic_grammar_exact() -> None:
    """Pythonic: a list of keyword calls; Python literals for booleans and null."""
    tool = ToolSpec(
        "set_flag",
        "",
        {"type": "object", "properties": {"on": {"type": "boolean"}, "note": {"type": "null"}}, "required": ["on"]},
    )
    assert tool_call_grammar([tool], "pythonic", tool_choice="required") == (
        'root ::= "[" call (", " call)* "]"\n'
        'call-set-flag ::= "set_flag(" "on=" boolean (", " "note=" null)? ")"\n'
        "call ::= call-set-flag\n"
        'boolean ::= "True" | "False"\n'
        'null ::= "None"\n'
    )


def test_gemma_and_json_roots() -> None:
    """Gemma wraps one call in a tool_code fence; Llama-3 JSON uses the ``parameters`` key."""
    gemma = tool_call_grammar([PING], "gemma_tool_code", tool_choice="required")
    assert gemma == 'root ::= "```tool_code\\n" call "\\n```"\ncall-ping ::= "ping()"\ncall ::= call-ping\n'
    assert tool_call_grammar([PING], "json", tool_choice="required") == (
        'root ::= call\ncall-ping ::= "{\\"name\\": \\"ping\\", \\"parameters\\": " "{}" "}"\ncall ::= call-ping\n'
    )


def test_nested_object_array_and_number() -> None:
    """Nested objects get their own rule; arrays follow ``items``; numbers use the number rule."""
    tool = ToolSpec(
        "route",
        "",
        {
            "type": "object",
            "properties": {
                "stops": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                "limits": {"type": "object", "properties": {"kg": {"type": "number"}}, "required": ["kg"]},
            },
            "required": ["stops", "limits"],
        },
    )
    grammar = tool_call_grammar([tool], "hermes_list", tool_choice="required")
    assert grammar.splitlines()[:5] == [
        'root ::= "<tool_call>[" call (", " call)* "]</tool_call>"',
        'route-args-stops ::= "[" string (", " string)* "]"',
        'route-args-limits ::= "{" "\\"kg\\": " number "}"',
        'route-args ::= "{" "\\"stops\\": " route-args-stops ", " "\\"limits\\": " route-args-limits "}"',
        'call-route ::= "{\\"name\\": \\"route\\", \\"arguments\\": " route-args "}"',
    ]


def test_only_optional_keys() -> None:
    """With no required keys, any in-order subset of the optional keys is allowed, including none."""
    tool = ToolSpec("f", "", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}})
    assert tool_call_grammar([tool], "pythonic", tool_choice="required").splitlines()[1] == (
        'call-f ::= "f(" ("a=" integer (", " "b=" integer)? | "b=" integer)? ")"'
    )


def test_unmodelled_schema_falls_back_to_any_value() -> None:
    """A property without a usable type (here ``$ref``) accepts any JSON value."""
    tool = ToolSpec("f", "", {"type": "object", "properties": {"x": {"$ref": "#/defs/X"}}, "required": ["x"]})
    lines = tool_call_grammar([tool], "json", tool_choice="required").splitlines()
    assert lines[1] == 'f-args ::= "{" "\\"x\\": " value "}"'
    assert "value ::= object | array | string | number | boolean | null" in lines


def test_auto_lets_the_model_answer_and_binds_once_a_call_starts() -> None:
    """With tool_choice=auto: a call, or text without the call's first character optionally followed by one."""
    assert tool_call_grammar([PING], "hermes", tool_choice="auto") == (
        "root ::= tool-calls | answer tool-calls?\n"
        'call-ping ::= "{\\"name\\": \\"ping\\", \\"arguments\\": " "{}" "}"\n'
        "call ::= call-ping\n"
        'tool-calls ::= "<tool_call>\\n" call "\\n</tool_call>"\n'
        "answer ::= [^<]+\n"
    )
    starts = {
        name: tool_call_grammar([PING], name).splitlines()[-1]
        for name in ("hermes_list", "json", "pythonic", "gemma_tool_code")
    }
    assert starts == {
        "hermes_list": "answer ::= [^<]+",
        "json": "answer ::= [^{]+",
        "pythonic": "answer ::= [^\\[]+",
        "gemma_tool_code": "answer ::= [^`]+",
    }


def test_auto_with_reasoning_puts_the_think_block_first() -> None:
    """An optional think block comes before the answer-or-call choice (required when the template opened it)."""
    think = Reasoning("<think>", "</think>")
    lines = tool_call_grammar([PING], "hermes", reasoning=think).splitlines()
    assert lines[0] == "root ::= think? turn"
    assert "turn ::= tool-calls | answer tool-calls?" in lines
    assert 'think ::= "<think>" [^<]* "</think>" [ \\n]*' in lines
    opened = tool_call_grammar([PING], "hermes", reasoning=Reasoning("<think>", "</think>", starts_open=True))
    assert opened.splitlines()[0] == "root ::= think turn"


def test_tool_choice_restricts_to_one_tool() -> None:
    """Naming a tool in ``tool_choice`` leaves only that tool in the grammar."""
    assert tool_call_grammar([WEATHER, PING], "gemma_tool_code", tool_choice="ping").splitlines()[-1] == (
        "call ::= call-ping"
    )


def test_errors() -> None:
    """No tools, an unknown format, or an unknown tool_choice are configuration errors."""
    with pytest.raises(ConfigError, match=r"needs at least one tool"):
        tool_call_grammar([], "hermes")
    with pytest.raises(ConfigError, match=r"no grammar for tool format 'xml'"):
        tool_call_grammar([PING], "xml")
    with pytest.raises(ConfigError, match=r"tool_choice names 'nope', which is not among the offered tools"):
        tool_call_grammar([PING], "hermes", tool_choice="nope")


def test_literal_escaping() -> None:
    """Quotes, backslashes and newlines are escaped in GBNF literals."""
    assert gbnf_literal('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'


def test_reasoning_block_may_precede_the_call() -> None:
    """With reasoning markers, an optional <think> block comes first; a template-opened block must be closed."""
    opened = tool_call_grammar([PING], "hermes", tool_choice="required", reasoning=Reasoning("<think>", "</think>"))
    assert opened.splitlines()[0] == "root ::= think? tool-calls"
    assert opened.splitlines()[-1] == 'think ::= "<think>" [^<]* "</think>" [ \\n]*'
    started = tool_call_grammar(
        [PING], "hermes", tool_choice="required", reasoning=Reasoning("<think>", "</think>", starts_open=True)
    )
    assert started.splitlines()[0] == "root ::= think tool-calls"
    assert started.splitlines()[-1] == 'think ::= [^<]* "</think>" [ \\n]*'
