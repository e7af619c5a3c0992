"""The one call-identity key: a call's name and its canonical arguments."""

from __future__ import annotations

from tooldispatch.types import call_key, canonical_arguments


def test_key_ignores_key_order_and_reads_a_json_string() -> None:
    """Arguments in another key order, or written as a JSON string, are the same call."""
    key = call_key("f", {"b": [1, {"y": 2, "x": 1}], "a": "é"})
    assert key == call_key("f", {"a": "é", "b": [1, {"x": 1, "y": 2}]})
    assert key == call_key("f", '{"a": "é", "b": [1, {"x": 1, "y": 2}]}')
    assert key == 'f\x00{"a": "é", "b": [1, {"x": 1, "y": 2}]}'


def test_key_tells_names_and_values_apart() -> None:
    """Another name, another value or another JSON type is another call."""
    key = call_key("f", {"a": 1})
    assert call_key("g", {"a": 1}) != key
    assert call_key("f", {"a": 1.0}) != key
    assert call_key("f", {"a": True}) != key
    assert call_key("f", {"a": "1"}) != key


def test_unwritable_arguments_still_get_a_key() -> None:
    """A string that is not JSON stays as written; arguments nested too deeply equal no other value."""
    assert canonical_arguments("not json") == "not json"
    deep: list[object] = []
    for _ in range(100_000):
        deep = [deep]
    other: list[object] = []
    for _ in range(100_000):
        other = [other]
    assert canonical_arguments(deep) != canonical_arguments(other)
    assert canonical_arguments(deep) == canonical_arguments(deep)
