"""Validation: the compiled fast check never accepts what jsonschema rejects; messages; schema errors."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tooldispatch.errors import ConfigError
from tooldispatch.repair import repair_call, schema_errors
from tooldispatch.repair.validate import fast_check, validator_for
from tooldispatch.toolspec import ToolSpec

from .schemas import ORDER, WEATHER

BOUNDS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "n": {"type": "number", "exclusiveMinimum": 0, "maximum": 10},
        "s": {"type": "string", "minLength": 2, "maxLength": 4},
        "a": {"type": "array", "items": {"type": ["integer", "null"]}, "minItems": 1, "maxItems": 2},
        "o": {"anyOf": [{"type": "boolean"}, {"enum": ["x", "y"]}]},
    },
}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-20, 20)
    | st.floats(-20, 20, allow_nan=False)
    | st.sampled_from(["", "x", "gold", "celsius", "Paris", "5", "abcde"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["location", "unit", "days", "n", "s", "a", "o", "id", "tier", "customer", "items", "sku"]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@pytest.mark.parametrize("schema", [WEATHER, ORDER, BOUNDS])
@settings(max_examples=150, deadline=None)
@given(value=json_values)
def test_fast_check_never_accepts_what_jsonschema_rejects(schema: dict[str, Any], value: Any) -> None:
    """Whenever the compiled check says valid, Draft 2020-12 validation agrees."""
    check = fast_check(schema)
    assert check is not None
    if check(value):
        assert jsonschema.Draft202012Validator(schema).is_valid(value), value


def test_fast_check_accepts_plain_valid_calls() -> None:
    """Typical valid arguments pass the compiled check (so they take the hot path)."""
    weather = fast_check(WEATHER)
    order = fast_check(ORDER)
    assert weather is not None and order is not None
    assert weather({"location": "Paris", "unit": "celsius", "days": 3}) is True
    assert order({"customer": {"id": 1, "tier": "gold"}, "items": [{"sku": "A", "quantity": 2}], "note": None})


def test_fast_check_is_stricter_where_repair_applies() -> None:
    """Valid-but-repairable values (5.0 for an integer, an undeclared key) leave the hot path."""
    weather = fast_check(WEATHER)
    search = fast_check({"type": "object", "properties": {"q": {"type": "string"}}})
    anything = fast_check({"type": "object"})
    assert weather is not None and search is not None and anything is not None
    assert weather({"location": "Paris", "days": 3.0}) is False
    assert search({"Q": "x"}) is False
    assert anything({"Q": "x"}) is True


def test_equal_schemas_share_one_compiled_check() -> None:
    """Equal schemas in distinct objects (tools rebuilt every turn) reuse one compiled check and validator."""
    assert fast_check(copy.deepcopy(WEATHER)) is fast_check(copy.deepcopy(WEATHER))
    assert validator_for(copy.deepcopy(ORDER)) is validator_for(copy.deepcopy(ORDER))


def test_one_compiled_schema_holds_the_check_and_the_validator() -> None:
    """The fast check and the jsonschema validator of a schema are the two halves of its one compiled entry."""
    from types import MappingProxyType

    from tooldispatch.repair.validate import compiled

    entry = compiled(copy.deepcopy(ORDER))
    assert compiled(MappingProxyType(copy.deepcopy(ORDER))) is entry  # a registry's read-only view: the same entry
    assert fast_check(copy.deepcopy(ORDER)) is entry.check
    assert validator_for(copy.deepcopy(ORDER)) is entry.validator()


def test_unsupported_keyword_has_no_fast_check() -> None:
    """A schema with a keyword outside the compiled subset is always validated by jsonschema."""
    assert fast_check({"type": "object", "properties": {"s": {"type": "string", "pattern": "^a"}}}) is None
    assert fast_check({"type": "object", "properties": {"e": {"enum": [1, 2]}}}) is None


def test_integer_float_is_repaired_to_int() -> None:
    """``3.0`` for an integer is valid JSON Schema but comes back as the int 3, recorded as a type repair."""
    tools = {"w": ToolSpec("w", parameters=WEATHER)}
    result = repair_call("w", {"location": "P", "days": 3.0}, tools, level="lossless")
    assert result.arguments == {"location": "P", "days": 3}
    assert type(result.arguments["days"]) is int


def test_schema_errors_bounds_message() -> None:
    """A bound violation names the path, the value and the rule."""
    assert schema_errors({"n": 0}, BOUNDS) == [
        ("/n", "/n: 0 is invalid: 0 is less than or equal to the minimum of 0"),
    ]


def test_invalid_schema_is_a_config_error() -> None:
    """A tool whose parameters are not a valid JSON Schema raises ConfigError naming the tool."""
    tools = {"bad": ToolSpec("bad", parameters={"type": "object", "properties": {"x": {"type": "strng"}}})}
    with pytest.raises(ConfigError, match="tool 'bad' has an invalid parameters schema"):
        repair_call("bad", {"x": 1}, tools, level="bounded")


def test_recursive_schema_and_deep_value() -> None:
    """A recursive schema with deeply nested arguments is validated without raising."""
    tree: dict[str, Any] = {
        "type": "object",
        "properties": {"node": {"$ref": "#/$defs/N"}},
        "$defs": {"N": {"type": "object", "properties": {"child": {"$ref": "#/$defs/N"}}}},
    }
    value: dict[str, Any] = {}
    for _ in range(3000):
        value = {"child": value}
    result = repair_call("t", {"node": value}, {"t": ToolSpec("t", parameters=tree)}, level="bounded")
    assert (result.ok, result.error) == (
        False,
        "t: invalid arguments: /: the arguments are nested too deeply to validate",
    )


_ORDER_PROBE = """
from tooldispatch.repair import schema_errors
schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "additionalProperties": {"type": "string"}}
arguments = {"zeta": 1, "n": "x", "alpha": [2], "mid": {"deep": 3}, "beta": None}
print(schema_errors(arguments, schema, limit=4))
"""


def test_errors_come_in_the_order_the_arguments_were_written() -> None:
    """jsonschema visits extra keys in set order, which varies with the hash seed; the messages must not."""
    outputs = {
        subprocess.run(
            [sys.executable, "-c", _ORDER_PROBE],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(6)
    }
    expected = [
        ("/zeta", "/zeta: expected string, got 1"),
        ("/n", '/n: expected integer, got "x"'),
        ("/alpha", "/alpha: expected string, got [2]"),
        ("/mid", '/mid: expected string, got {"deep": 3}'),
    ]
    assert outputs == {f"{expected}\n"}


OPEN: dict[str, Any] = {
    "type": "object",
    "properties": {"n": {"type": "number"}, "any": {}, "list": {"type": "array"}, "map": {"type": "object"}},
}


@pytest.mark.parametrize(
    ("arguments", "pointer", "shown"),
    [
        ({"n": float("inf")}, "/n", "inf"),
        ({"n": float("nan")}, "/n", "nan"),
        ({"any": [1, float("-inf")]}, "/any/1", "-inf"),
        ({"list": [float("inf")]}, "/list/0", "inf"),
        ({"map": {"x": {"y": float("nan")}}}, "/map/x/y", "nan"),
    ],
)
def test_nan_and_infinity_are_refused_wherever_they_are(arguments: dict[str, Any], pointer: str, shown: str) -> None:
    """JSON holds no NaN or infinity (``1e400`` reads as one): no schema, open or not, lets one reach a tool."""
    check = fast_check(OPEN)
    assert check is not None and check(arguments) is False
    assert schema_errors(arguments, OPEN) == [
        (pointer, f"{pointer}: {shown} is not a finite number; send a number JSON can hold")
    ]
    result = repair_call("f", arguments, {"f": ToolSpec("f", "", OPEN)}, level="bounded")
    assert (result.ok, result.bucket) == (False, "SchemaMismatch")


def test_finite_numbers_in_open_values_pass() -> None:
    """An open value with finite numbers is accepted by the fast check and the validator alike."""
    arguments = {"n": 1e300, "any": [1.5, {"x": -2.0}], "list": [0.5], "map": {"k": [1e-300]}}
    check = fast_check(OPEN)
    assert check is not None and check(arguments) is True
    assert schema_errors(arguments, OPEN) == []
