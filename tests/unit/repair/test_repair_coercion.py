"""Lossless type coercion: only directions that cannot change meaning."""

from __future__ import annotations

from typing import Any

import pytest

from tooldispatch.repair.types import allows_null, coerce, resolve_ref, type_matches


@pytest.mark.parametrize(
    ("value", "wanted", "expected"),
    [
        ("5", "integer", ("type", 5)),
        (" -12 ", "integer", ("type", -12)),
        ("5.0", "integer", ("type", 5)),
        (5.0, "integer", ("type", 5)),
        ("5.5", "number", ("type", 5.5)),
        ("5", "number", ("type", 5)),
        ("1e3", "number", ("type", 1000.0)),
        ("true", "boolean", ("type", True)),
        ("False", "boolean", ("type", False)),
        ('{"a": 1}', "object", ("json_string", {"a": 1})),
        ("[1, 2]", "array", ("json_string", [1, 2])),
        ((1, 2), "array", ("type", [1, 2])),
    ],
)
def test_lossless_coercions(value: Any, wanted: str, expected: tuple[str, Any]) -> None:
    """Each lossless direction yields the value the text spells, with its repair kind."""
    assert coerce(value, wanted) == expected


@pytest.mark.parametrize(
    ("value", "wanted"),
    [
        (5, "string"),
        (True, "string"),
        ("5.5", "integer"),
        ("007", "integer"),
        ("+5", "integer"),
        ("five", "integer"),
        ("NaN", "number"),
        ("Infinity", "number"),
        (1, "boolean"),
        ("yes", "boolean"),
        ("[1, 2]", "object"),
        ("{bad json}", "object"),
        (5.5, "integer"),
    ],
)
def test_lossy_directions_are_refused(value: Any, wanted: str) -> None:
    """A coercion that would change or invent meaning is not made."""
    assert coerce(value, wanted) is None


def test_integer_is_a_number_but_bool_is_not() -> None:
    """JSON typing: an integer satisfies number; a boolean satisfies neither integer nor number."""
    assert type_matches(5, "number") is True
    assert type_matches(True, "integer") is False
    assert type_matches(True, "number") is False
    assert type_matches(5.0, "integer") is True
    assert type_matches(5.5, "integer") is False


def test_resolve_local_ref() -> None:
    """A local ``$ref`` resolves through ``$defs``; an unresolvable one is returned unchanged."""
    root = {"$defs": {"A": {"type": "string"}, "B": {"$ref": "#/$defs/A"}}}
    assert resolve_ref({"$ref": "#/$defs/B"}, root) == {"type": "string"}
    assert resolve_ref({"$ref": "#/$defs/C"}, root) == {"$ref": "#/$defs/C"}


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "string"}, False),
        ({"type": ["string", "null"]}, True),
        ({"anyOf": [{"type": "integer"}, {"type": "null"}]}, True),
        ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, False),
        ({"enum": ["a", "b"]}, False),
        ({"enum": ["a", None]}, True),
        ({"description": "anything"}, True),
    ],
)
def test_allows_null(schema: dict[str, Any], expected: bool) -> None:
    """Whether ``null`` can be valid is read from type, enum and anyOf."""
    assert allows_null(schema, schema) is expected
