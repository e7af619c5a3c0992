"""The pythonic finder: call lists read with ast, literals walked, never evaluated."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldispatch.parsing.formats import pythonic
from tooldispatch.parsing.formats.pythonic import PyCall


def test_list_of_calls() -> None:
    """[f(a=1), g()] at a line start gives one call per element."""
    found = pythonic.find('[get_weather(city="Paris", days=3), get_time()]')
    assert [(c.name, c.arguments, c.format, c.stage) for c in found] == [
        ("get_weather", {"city": "Paris", "days": 3}, "pythonic", "strict"),
        ("get_time", {}, "pythonic", "strict"),
    ]


def test_literal_values_and_json_spellings() -> None:
    """Containers, negatives and JSON names (true/null) are read as values."""
    found = pythonic.find("[f(a=[1, -2.5], b={'k': (1, 2)}, c=true, d=None, e=null)]")
    assert found[0].arguments == {"a": [1, -2.5], "b": {"k": [1, 2]}, "c": True, "d": None, "e": None}


def test_non_literal_argument_is_an_error_not_evaluated() -> None:
    """A call or name as a value is rejected with a message; nothing runs."""
    found = pythonic.find("[f(a=__import__('os').system('x'))]")
    assert [(c.name, c.arguments) for c in found] == [("f", None)]
    assert found[0].decode_error is not None and found[0].decode_error.startswith("argument 'a': not a literal")


def test_positional_arguments_are_an_error() -> None:
    """Positional arguments cannot be mapped without a schema, so they are reported."""
    found = pythonic.find('[f("Paris")]')
    assert found[0].decode_error == "positional arguments are not allowed; pass every argument as name=value"


def test_one_bad_element_keeps_the_others() -> None:
    """A syntax error in one element does not drop the other elements."""
    found = pythonic.find('[a(x=1), b(y=), c(z="ok")]')
    assert [(c.name, c.arguments, c.decode_error) for c in found] == [
        ("a", {"x": 1}, None),
        ("b", None, "not a valid call"),
        ("c", {"z": "ok"}, None),
    ]


def test_unclosed_list_is_truncated() -> None:
    """A list cut off at the end is truncated."""
    found = pythonic.find('[get_weather(city="Par')
    assert [(c.name, c.truncated) for c in found] == [("get_weather", True)]


def test_negatives() -> None:
    """Prose, links and mid-line brackets are not pythonic calls."""
    assert pythonic.find("Call get_weather(city='Paris') to know.") == []
    assert pythonic.find("See [the docs](https://example.com).") == []
    assert pythonic.find("as in [1, 2, 3]") == []


def test_parse_python_calls_rejects_statements() -> None:
    """Assignments and imports are not call lists."""
    assert pythonic.parse_python_calls("x = f()") is None
    assert pythonic.parse_python_calls("import os") is None
    assert pythonic.parse_python_calls("f(a=1)\ng(b=2)") == [
        pythonic.PyCall("f", {"a": 1}),
        pythonic.PyCall("g", {"b": 2}),
    ]


def _shown(calls: list[PyCall] | None) -> str:
    """Calls as text that tells 1, 1.0 and True apart."""
    if calls is None:
        return "None"
    return json.dumps([[c.name, c.arguments, c.error] for c in calls])


@pytest.mark.parametrize(
    "source",
    [
        '[get_weather(city="Paris", days=3), get_time()]',
        "functions.assign_driver(driver_id='d-7', tags=['a', \"b\"], opts={'x': -1.5e3, \"y\": null},)",
        "[f(a=[], b={}, c=true, d=None, e=-0, f=0.25)]",
        '[\n  f(\n    a = "x",\n  ),\n]',
        'list_drivers(zone="north")\n\n  \nassign_driver(driver_id="d-1")',
    ],
)
def test_plain_call_lists_are_read_without_ast_as_ast_reads_them(source: str) -> None:
    """The common shape takes the quick reader, which gives exactly what ast gives."""
    quick = pythonic.read_plain(source)
    assert quick is not None
    assert _shown(quick) == _shown(pythonic._parse_with_ast(source))


@pytest.mark.parametrize(
    "source",
    [
        'f("x")',
        'f(a="x" "y")',
        'f(a="\\n")',
        "f(a=(1, 2))",
        "f(a=007)",
        "f(a=1.)",
        "f(a=- 1)",
        "f(a=x)",
        "f\n(a=1)",
        "f(a=1)\n  g(b=2)",
        "f(a=1); g(b=2)",
        "f(a=1, a=2)",
        "print(f(a=1))",
        "f(**k)",
        "f(a=1)  # done",
        'f(a="é")',
        "class(a=1)",
        "f(a={1, 2})",
        "f(a={1: 2})",
        "[]",
    ],
)
def test_other_sources_are_left_to_ast(source: str) -> None:
    """Escapes, tuples, positional arguments, several statements and the like go to ast."""
    assert pythonic.read_plain(source) is None


_PIECES = st.sampled_from(
    [
        "f", "g", "functions", "tools", ".", "x", "_y1", "True", "None", "null", "true", "print", "if",
        "(", ")", "[", "]", "{", "}", ",", "=", "==", ":", " ", "\n", "\t", "\r", "#",
        '"a"', "'b c'", '""', '"', "'", "\\", "\\n", "\x00", "é",
        "0", "1", "007", "-", "+", "1.5", "1.", ".5", "2e3", "1e5x", "9" * 120, "_",
    ]
)  # fmt: skip
_CALLISH = st.lists(_PIECES, max_size=25).map("".join)
_TEMPLATED = st.builds(
    lambda name, body, wrap: f"[{name}({body})]" if wrap else f"{name}({body})",
    st.sampled_from(["f", "functions.f", "tools.api.f", "a.b", "print"]),
    st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), _CALLISH), max_size=3).map(
        lambda kv: ", ".join(f"{k}={v}" for k, v in kv)
    ),
    st.booleans(),
)


def _mostly(good: st.SearchStrategy[Any], odd: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``good`` four times in five, ``odd`` otherwise."""
    return st.integers(0, 4).flatmap(lambda i: odd if i == 0 else good)


_WS = st.sampled_from(["", "", " ", "\n", "\t", "  \n "])
_NUMBERS = _mostly(
    st.one_of(st.integers(-(10**20), 10**20).map(str), st.floats(allow_nan=False, allow_infinity=False).map(repr)),
    st.sampled_from(["0", "-0.0", "1e3", "2E-2", "1e400", "00", "007", "1.", "1_0", "0x1f", "- 2", "1j"]),
)
_STRINGS = st.builds(
    lambda quote, body: f"{quote}{body}{quote}",
    st.sampled_from(['"', "'"]),
    _mostly(
        st.text(alphabet=st.sampled_from(list("ab #:,()[]{}=\t")), max_size=6),
        st.text(alphabet=st.sampled_from([*"ab\"'", "\\", "\n", "\r", "é", "\x00"]), max_size=4),
    ),
)
_SCALARS = st.one_of(
    _NUMBERS,
    _STRINGS,
    _mostly(
        st.sampled_from(["True", "False", "None", "true", "false", "null"]), st.sampled_from(["x", "(1, 2)", "{1}"])
    ),
)


def _joined(items: list[str], ws: str, trailing: bool) -> str:
    return f",{ws}".join(items) + ("," if trailing and items else "")


_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.builds(lambda xs, ws, t: f"[{ws}{_joined(xs, ws, t)}{ws}]", st.lists(inner, max_size=3), _WS, st.booleans()),
        st.builds(
            lambda kv, ws, t: "{" + ws + _joined([f"{k}{ws}:{ws}{v}" for k, v in kv], ws, t) + ws + "}",
            st.lists(st.tuples(_mostly(_STRINGS, _NUMBERS), inner), max_size=3),
            _WS,
            st.booleans(),
        ),
    ),
    max_leaves=6,
)
_CALLS = st.builds(
    lambda name, ws, kv, t: f"{name}{ws}(" + _joined([f"{k}{ws}={ws}{v}" for k, v in kv], ws, t) + ")",
    _mostly(
        st.sampled_from(["f", "get_weather", "functions.f", "tools.api.f", "a.b", "functions"]),
        st.sampled_from(["print", "class", "a . b", "f.if", "é"]),
    ),
    _mostly(st.just(""), st.sampled_from([" ", "\n"])),
    _mostly(
        st.lists(
            st.tuples(st.sampled_from(["a", "b", "city", "x_1"]), _VALUES), max_size=3, unique_by=lambda kv: kv[0]
        ),
        st.lists(st.tuples(st.sampled_from(["a", "if", "True", "match"]), _VALUES), max_size=3),
    ),
    st.booleans(),
)
_PLAIN = st.one_of(
    _CALLS,
    st.builds(
        lambda cs, sep: sep.join(cs),
        st.lists(_CALLS, min_size=2, max_size=3),
        st.sampled_from(["\n", "\n\n", " \n", "\n ", ";"]),
    ),
    st.builds(
        lambda cs, ws, t: f"[{ws}{_joined(cs, ws, t)}{ws}]",
        st.lists(_CALLS, min_size=1, max_size=3),
        _WS,
        st.booleans(),
    ),
)
_MUTATED = st.builds(
    lambda text, at, piece: text[: at % (len(text) + 1)] + piece + text[at % (len(text) + 1) :],
    _PLAIN,
    st.integers(0, 200),
    _PIECES,
)


@settings(max_examples=1500, deadline=None)
@given(st.one_of(_PLAIN, _MUTATED, _CALLISH, _TEMPLATED))
def test_the_quick_reader_agrees_with_ast_wherever_it_answers(source: str) -> None:
    """On random call-like text, every answer of the quick reader is the answer ast gives."""
    source = source.strip()
    quick = pythonic.read_plain(source)
    if quick is not None:
        assert _shown(quick) == _shown(pythonic._parse_with_ast(source)), source


@pytest.mark.parametrize("depth", [20, 33, 250, 100_000])
def test_deeply_nested_values_reach_ast_which_decides(depth: int) -> None:
    """Past a small depth the quick reader steps aside (no deep recursion); the answer is ast's."""
    source = "f(a=" + "[" * depth + "]" * depth + ")"
    assert (pythonic.read_plain(source) is not None) == (depth <= 32)
    assert _shown(pythonic.parse_python_calls(source)) == _shown(pythonic._parse_with_ast(source))


@settings(max_examples=800, deadline=None)
@given(
    st.one_of(_CALLS, _MUTATED).map(lambda call: call[call.find("(") + 1 : call.rfind(")")] if "(" in call else call)
)
def test_the_fallback_reads_keyword_arguments_as_ast_does(inner: str) -> None:
    """The fallback's keyword-argument reader (the quick reader first) agrees with its ast walk on any text."""
    from tooldispatch.parsing import _fallback_values

    assert json.dumps(_fallback_values.parse_kwargs(inner)) == json.dumps(_fallback_values._kwargs_with_ast(inner)), (
        inner
    )
