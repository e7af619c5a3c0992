"""Property: repair_call on any schema and any arguments gives a result of the documented shape, or a ConfigError."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tooldispatch.errors import ConfigError
from tooldispatch.repair import RepairResult, repair_call
from tooldispatch.toolspec import ToolSpec

KEYS = st.sampled_from(["city", "unit", "n", "items", "City", "driver_id", "driverId"])
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.sampled_from(["", "x", "celsius", "celcius", "2", "true"])
)
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3), max_leaves=8
)
TYPES = st.sampled_from(["string", "integer", "number", "boolean", "array", "object", "null"])
LEAF_SCHEMAS = st.one_of(
    TYPES.map(lambda t: {"type": t}),
    st.lists(TYPES, min_size=1, max_size=3).map(lambda ts: {"type": ts}),
    st.lists(SCALARS, max_size=4).map(lambda values: {"enum": values}),
    st.just({"$ref": "#/$defs/u"}),
    st.sampled_from([{}, True, False]),
)
SCHEMAS = st.recursive(
    LEAF_SCHEMAS,
    lambda inner: st.one_of(
        st.dictionaries(KEYS, inner, max_size=3).map(lambda props: {"type": "object", "properties": props}),
        inner.map(lambda items: {"type": "array", "items": items}),
        st.lists(inner, min_size=1, max_size=3).map(lambda branches: {"anyOf": branches}),
    ),
    max_leaves=8,
)
ROOTS = st.one_of(
    st.dictionaries(KEYS, SCHEMAS, max_size=4).map(lambda props: {"type": "object", "properties": props}),
    SCHEMAS.filter(lambda schema: isinstance(schema, dict)),
)


@settings(max_examples=300, deadline=None)
@given(
    root=ROOTS,
    arguments=st.one_of(st.dictionaries(KEYS, VALUES, max_size=4), VALUES),
    name=st.sampled_from(["tag", "Tag", "tga", "nope"]),
    level=st.sampled_from(["bounded", "lossless", "none"]),
)
def test_any_schema_and_arguments_give_a_documented_result(root: Any, arguments: Any, name: str, level: Any) -> None:
    schema = {**root, "$defs": {"u": {"type": "string"}}}
    try:
        result = repair_call(name, arguments, {"tag": ToolSpec("tag", "", schema)}, level=level)
    except ConfigError:
        return  # an invalid schema (jsonschema says so), reported as the tool's configuration error
    assert isinstance(result, RepairResult)
    assert result.arguments is None or type(result.arguments) is dict
    assert result.ok == (result.bucket is None) == (result.error is None)
    if result.ok:
        assert result.name == "tag"
