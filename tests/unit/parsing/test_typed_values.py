"""XML-parameter values are typed by the tool's schema: objects and arrays decoded, strings kept as written."""

from __future__ import annotations

from typing import Any

import pytest

from tooldispatch.parsing._typed_values import decode_container, typed_value
from tooldispatch.parsing.core import parse_tool_calls

WRITE: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"},
                    "opts": {"type": "object"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "either": {"anyOf": [{"type": "array"}, {"type": "null"}]},
                    "n": {"type": "integer"},
                },
                "required": ["path"],
            },
        },
    }
]


def _qwen(params: str) -> str:
    return (
        f"<tool_call>\n<function=write_file>\n<parameter=path>\na.txt\n</parameter>\n{params}</function>\n</tool_call>"
    )


def _glm(pairs: str) -> str:
    return f"<tool_call>write_file\n<arg_key>path</arg_key>\n<arg_value>a.txt</arg_value>\n{pairs}</tool_call>"


def _invoke(params: str) -> str:
    return f'<invoke name="write_file">\n<parameter name="path">a.txt</parameter>\n{params}</invoke>'


def _calls(text: str) -> list[tuple[str, dict[str, Any], str, tuple[str, ...]]]:
    out = parse_tool_calls(text, WRITE)
    return [(c.name, c.arguments, c.bucket, tuple(r.before for r in c.repairs)) for c in out.calls]


@pytest.mark.parametrize(
    ("text", "args", "bucket", "fixes"),
    [
        (_qwen('<parameter=opts>\n{"mode": "w"}\n</parameter>\n'), {"opts": {"mode": "w"}}, "ok_strict", ()),
        (
            _qwen("<parameter=opts>\n{'mode': 'w', 'force': True}\n</parameter>\n"),
            {"opts": {"mode": "w", "force": True}},
            "ok_fallback",
            ("single_quotes", "python_literals"),
        ),
        (
            _qwen("<parameter=tags>\n['a', 'b']\n</parameter>\n"),
            {"tags": ["a", "b"]},
            "ok_fallback",
            ("single_quotes",),
        ),
        (
            _qwen('<parameter=opts>\n{\\"mode\\": \\"w\\"}\n</parameter>\n'),
            {"opts": {"mode": "w"}},
            "ok_fallback",
            ("escaped_quotes",),
        ),
        (
            _glm("<arg_key>tags</arg_key>\n<arg_value>['a', 'b']</arg_value>\n"),
            {"tags": ["a", "b"]},
            "ok_fallback",
            ("single_quotes",),
        ),
        (
            _glm('<arg_key>opts</arg_key>\n<arg_value>{"k": [1, 2]}</arg_value>\n'),
            {"opts": {"k": [1, 2]}},
            "ok_strict",
            (),
        ),
        (_invoke("<parameter name=\"tags\">['a']</parameter>\n"), {"tags": ["a"]}, "ok_fallback", ("single_quotes",)),
        (_invoke('<parameter name="either">["x"]</parameter>\n'), {"either": ["x"]}, "ok_strict", ()),
    ],
)
def test_object_and_array_values_are_decoded_by_the_schema_type(
    text: str, args: dict[str, Any], bucket: str, fixes: tuple[str, ...]
) -> None:
    """JSON is read as written; a Python literal or escaped-quote JSON is read and names its tolerance."""
    assert _calls(text) == [("write_file", {"path": "a.txt", **args}, bucket, fixes)]


@pytest.mark.parametrize(
    ("text", "content"),
    [
        (_qwen('<parameter=content>\n{"a": 1}\n</parameter>\n'), '{"a": 1}'),
        (_qwen("<parameter=content>\nline1\nline2\n\n</parameter>\n"), "line1\nline2\n"),
        (_qwen("<parameter=content>\n['not', 'a', 'list']\n</parameter>\n"), "['not', 'a', 'list']"),
        (_glm("<arg_key>content</arg_key>\n<arg_value>[1, 2]\n</arg_value>\n"), "[1, 2]"),
        (_glm("<arg_key>content</arg_key><arg_value>  padded  \n\n</arg_value>"), "  padded  \n"),
        (_invoke('<parameter name="content">{"x": true}</parameter>\n'), '{"x": true}'),
    ],
)
def test_string_values_keep_their_exact_text(text: str, content: str) -> None:
    """A string parameter keeps the text as written (JSON-looking text too), a trailing newline included."""
    assert _calls(text) == [("write_file", {"path": "a.txt", "content": content}, "ok_strict", ())]


def test_a_value_that_is_no_literal_stays_text_for_the_schema_check() -> None:
    """An object parameter whose text reads as nothing safe is not guessed: the schema check reports it."""
    out = parse_tool_calls(_qwen("<parameter=opts>\n{'mode': w}\n</parameter>\n"), WRITE)
    assert out.calls == ()
    assert [c.bucket for c in out.candidates] == ["SchemaMismatch"]
    assert out.candidates[0].arguments == {"path": "a.txt", "opts": "{'mode': w}"}


def test_numbers_stay_text_for_lossless_repair() -> None:
    """An integer written as text is converted by repair (recorded), not by the typing step."""
    assert _calls(_qwen("<parameter=n>\n5\n</parameter>\n")) == [
        ("write_file", {"path": "a.txt", "n": 5}, "repaired", ("5",))
    ]


@pytest.mark.parametrize(
    ("text", "types", "value"),
    [
        ('{"a": 1}', (), {"a": 1}),
        ("{'a': 1}", (), "{'a': 1}"),
        ("[1]", ("integer",), "[1]"),
        ("[1]", ("object",), "[1]"),
        ("(1, 2)", ("array",), "(1, 2)"),
        ("{'a': __import__('os')}", ("object",), "{'a': __import__('os')}"),
        ("{'a': 1} trailing", ("object",), "{'a': 1} trailing"),
        ("{'a': [1, 2", ("object",), "{'a': [1, 2"),
    ],
)
def test_the_literal_reader_takes_only_whole_literals(text: str, types: tuple[str, ...], value: Any) -> None:
    """Untyped keys decode JSON only; nothing but a whole JSON or Python literal of the wanted type is decoded."""
    assert typed_value(text, types)[0] == value


def test_the_literal_reader_is_linear_on_deep_and_long_input() -> None:
    """Deep nesting past the decoder's bound and a megabyte literal are refused or read without recursion."""
    assert decode_container("[" * 200_000) is None
    big = "[" + ", ".join(["'x'"] * 200_000) + "]"
    decoded = decode_container(big)
    assert decoded is not None and len(decoded[0]) == 200_000
