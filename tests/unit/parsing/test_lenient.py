"""Lenient JSON: each tolerance decodes to the exact value and records its fix by name."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldispatch.parsing.lenient import (
    MAX_DEPTH,
    NOT_JSON,
    LenientJSONError,
    LenientResult,
    loads_lenient,
    loads_strict,
    strict_value,
)


def test_valid_json_takes_the_fast_path_with_no_fixes() -> None:
    """Well-formed JSON decodes exactly, with no fixes and complete=True."""
    assert loads_lenient('{"city": "Paris", "days": [1, 2.5], "ok": true, "x": null}') == LenientResult(
        {"city": "Paris", "days": [1, 2.5], "ok": True, "x": None}, (), True
    )


@pytest.mark.parametrize(
    ("text", "value", "fixes"),
    [
        ("{'city': 'Paris'}", {"city": "Paris"}, ("single_quotes",)),
        ("{'q': 'it\\'s \"here\"'}", {"q": 'it\'s "here"'}, ("single_quotes",)),
        ('{"a": True, "b": False, "c": None}', {"a": True, "b": False, "c": None}, ("python_literals",)),
        ('{"a": [1, 2,],}', {"a": [1, 2]}, ("trailing_comma",)),
        ('{"a": 1 "b": 2}', {"a": 1, "b": 2}, ("missing_comma",)),
        ("{city: 'Paris', max_days: 3}", {"city": "Paris", "max_days": 3}, ("unquoted_keys", "single_quotes")),
        ('{"note": "line one\nline\ttwo"}', {"note": "line one\nline\ttwo"}, ("raw_newline",)),
        ('{"path": "C:\\dir"}', {"path": "C:\\dir"}, ("bad_escape",)),
        ('{"a": .5, "b": +1, "c": 1., "d": 007}', {"a": 0.5, "b": 1, "c": 1.0, "d": 7}, ("loose_number",)),
        ('{\\n  "city": "Paris"\\n}', {"city": "Paris"}, ("stray_escape",)),
        ('{"a": [1, 2}', {"a": [1, 2]}, ("mismatched_closer",)),
        ('{"city": "Paris"}{"city": "Paris"}', {"city": "Paris"}, ("duplicated_object",)),
        ('{"city": "Paris"} {"city": "Paris"} done', {"city": "Paris"}, ("duplicated_object", "trailing_text")),
        ('{"city": "Paris"}\nLet me know!', {"city": "Paris"}, ("trailing_text",)),
        ("[1, 2]]", [1, 2], ("trailing_text",)),
        ("  {'a': 'x'}  ", {"a": "x"}, ("single_quotes",)),
    ],
)
def test_each_tolerance_is_decoded_and_named(text: str, value: Any, fixes: tuple[str, ...]) -> None:
    """Each malformation gives the intended value and exactly the fixes it needed."""
    assert loads_lenient(text) == LenientResult(value, fixes, True)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"city": "Paris", "units": ["c", "f"', {"city": "Paris", "units": ["c", "f"]}),
        ('{"city": "Par', {"city": "Par"}),
        ('{"a": {"b": {"c": 1', {"a": {"b": {"c": 1}}}),
        ('{"a": 1, "b"', {"a": 1}),
        ('{"a": 1, "b":', {"a": 1}),
        ('{"a": 1,', {"a": 1}),
        ('{"a": ', {}),
        ('{"a": 1, ', {"a": 1}),
        ('{"a": 1, "b": \n ', {"a": 1}),
        ("[1, ", [1]),
        ('{"a": tr', {}),
        ('{"a": 12e', {"a": 12}),
        ('{"a": "b\\', {"a": "b"}),
        ('{"a": "b\\u00', {"a": "b"}),
        ('{"a": "b\\ud83d', {"a": "b"}),
        ('{"a": "b\\ud83d\\ude', {"a": "b"}),
        ('{"a": "b\\\\u00', {"a": "b\\u00"}),
        ('"abc', "abc"),
        ("[", []),
    ],
)
def test_missing_closers_at_the_end_are_added(text: str, value: Any) -> None:
    """A value cut off at the end is closed, keeps what was complete, and reports complete=False."""
    assert loads_lenient(text) == LenientResult(value, ("missing_closer",), False)


def test_surrogate_pair_escapes_combine() -> None:
    """A \\u surrogate pair in a lenient string decodes to one character."""
    assert loads_lenient("{'e': '\\ud83d\\ude00'}").value == {"e": "\U0001f600"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": NaN}', "NaN is not a JSON number"),
        ('{"a": -Infinity}', "-Infinity is not a JSON number"),
        ("{'a': NaN}", "NaN is not a JSON number"),
        ("{'a': -Infinity}", "NaN and Infinity are not JSON numbers"),
        ("", "no JSON value"),
        ("   ", "no JSON value"),
        ("Sure, here you go", "unquoted text 'Sure'"),
        ('{"city": Paris}', "unquoted text 'Paris'"),
        ('{"a" 1}', "expected ':' after the key"),
        ('{"a": }', "expected a value"),
        ("]", "expected a value"),
        ('{"a": 1]', "']' closes nothing that is open"),
    ],
)
def test_unreadable_text_raises_a_clear_error(text: str, message: str) -> None:
    """Text that is not JSON even leniently raises LenientJSONError saying what was wrong."""
    with pytest.raises(LenientJSONError, match=message.replace("[", r"\[").replace("]", r"\]")):
        loads_lenient(text)


def test_error_is_a_value_error_with_a_position() -> None:
    """LenientJSONError is a ValueError and carries the offset where reading stopped."""
    with pytest.raises(ValueError) as info:
        loads_lenient('{"a": 1, "b": @}')
    assert isinstance(info.value, LenientJSONError)
    assert info.value.pos == 14


def test_ten_thousand_deep_brackets_are_refused_without_recursion() -> None:
    """10,000 open brackets raise LenientJSONError (never RecursionError) at the depth limit."""
    with pytest.raises(LenientJSONError, match=f"nesting deeper than {MAX_DEPTH} levels"):
        loads_lenient("[" * 10_000)
    with pytest.raises(LenientJSONError, match="nesting deeper"):
        loads_lenient("[" * 10_000 + "]" * 10_000)
    with pytest.raises(LenientJSONError, match="nesting deeper"):
        loads_lenient('{"a": ' * 10_000)


def test_valid_json_deeper_than_the_limit_is_refused() -> None:
    """Well-formed JSON nested past MAX_DEPTH is refused too, so later layers never recurse too deep."""
    with pytest.raises(LenientJSONError, match="nesting deeper"):
        loads_lenient("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    assert loads_lenient("[" * MAX_DEPTH + "]" * MAX_DEPTH).complete is True


def test_one_megabyte_inputs_return() -> None:
    """A 1 MB malformed object and 1 MB of prose both finish (a value or LenientJSONError)."""
    big = "{'k': '" + "x" * 1_000_000 + "', 'n': [" + "1, " * 1000 + "],}"
    result = loads_lenient(big)
    assert result.fixes == ("single_quotes", "trailing_comma")
    assert len(result.value["k"]) == 1_000_000
    assert len(result.value["n"]) == 1000
    with pytest.raises(LenientJSONError, match="unquoted text"):
        loads_lenient("word " * 200_000)


def test_huge_integer_literal_is_an_error_not_a_crash() -> None:
    """An integer with more digits than int() converts is a LenientJSONError."""
    with pytest.raises(LenientJSONError, match="unreadable number"):
        loads_lenient("{'n': " + "9" * 5000 + "}")


_NOT_JSON = object()
_JSONISH = st.lists(
    st.sampled_from([*"{}[]:,'\"\\ \n\t-+.eE0123456789", "true", "None", "NaN", "key", "\\n", "\\u00e9", "\\ud83d"]),
    max_size=60,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.one_of(_JSONISH, st.text(max_size=200)))
def test_arbitrary_text_gives_a_result_or_a_lenient_error(text: str) -> None:
    """On any text, loads_lenient returns or raises LenientJSONError, and JSON it accepts strictly is unchanged."""
    try:
        strict: Any = json.loads(text)
    except (ValueError, RecursionError):
        strict = _NOT_JSON
    try:
        result = loads_lenient(text)
    except LenientJSONError:
        return
    if strict is not _NOT_JSON:
        assert result == LenientResult(strict, (), True)
    if not result.fixes:
        assert result.complete is True


_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(10**6), 10**6), st.text(alphabet=st.characters(codec="utf-8"), max_size=8)
)
_CONTAINERS = st.recursive(
    st.one_of(st.lists(_SCALARS, max_size=3), st.dictionaries(st.text(max_size=5), _SCALARS, max_size=3)),
    lambda inner: st.one_of(
        st.lists(st.one_of(_SCALARS, inner), max_size=3),
        st.dictionaries(st.text(max_size=5), st.one_of(_SCALARS, inner), max_size=3),
    ),
    max_leaves=8,
)


def _within(part: Any, whole: Any) -> bool:
    """True when ``part`` holds only what ``whole`` holds: its keys and items, in order, each within ``whole``'s.

    A string or an integer within another is one its text starts.
    """
    if isinstance(whole, dict):
        return isinstance(part, dict) and all(
            key in whole and (_within(value, whole[key]) or value == whole[key]) for key, value in part.items()
        )
    if isinstance(whole, list):
        return isinstance(part, list) and all(_within(p, w) or p == w for p, w in zip(part, whole, strict=False))
    if isinstance(whole, str):
        return isinstance(part, str) and whole.startswith(part)
    if type(whole) is int:  # a number cut short reads as the digits that arrived
        return type(part) is int and str(whole).startswith(str(part))
    return part == whole


@settings(max_examples=300, deadline=None)
@given(_CONTAINERS, st.sampled_from([None, 1]), st.sampled_from([(", ", ": "), (",", ":")]), st.booleans(), st.data())
def test_a_json_text_cut_anywhere_reads_as_an_incomplete_prefix_of_its_value(
    value: Any, indent: int | None, separators: tuple[str, str], ascii_only: bool, data: st.DataObject
) -> None:
    """Cut after any character, a JSON object or array reads as cut off (never as an error), holding only its start."""
    text = json.dumps(value, indent=indent, separators=separators, ensure_ascii=ascii_only)
    cut = data.draw(st.integers(1, len(text) - 1)) if len(text) > 1 else 1
    prefix = text[:cut]
    if cut == len(text):
        return
    result = loads_lenient(prefix)
    assert result.complete is False, prefix
    assert "missing_closer" in result.fixes, prefix
    assert _within(result.value, value), (prefix, result.value)


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        _JSONISH, st.text(max_size=60), _CONTAINERS.map(json.dumps), st.sampled_from(["\ufeff{}", " [1] ", "1 2", ""])
    )
)
def test_loads_strict_is_json_loads(text: str) -> None:
    """``loads_strict`` gives ``json.loads``'s value (NaN as NaN), and fails with its message where it fails."""
    try:
        expected: Any = json.loads(text)
    except json.JSONDecodeError as exc:
        with pytest.raises(json.JSONDecodeError) as caught:
            loads_strict(text)
        assert (caught.value.msg, caught.value.pos) == (exc.msg, exc.pos)
        return
    assert json.dumps(loads_strict(text)) == json.dumps(expected)


def test_strict_value_refuses_what_json_loads_refuses() -> None:
    """A refused text gives NOT_JSON every time; any other text is read as json.loads reads it."""
    bad = "{'a': 1}"
    assert strict_value(bad) is NOT_JSON
    assert strict_value(bad) is NOT_JSON
    assert strict_value(' {"a": [1, 2.5, null]} ') == {"a": [1, 2.5, None]}
    assert strict_value("") is NOT_JSON
    first, second = strict_value('{"a": [1]}'), strict_value('{"a": [1]}')
    assert first == second == {"a": [1]} and first is not second  # each caller gets its own value
