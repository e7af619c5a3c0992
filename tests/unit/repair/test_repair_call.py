"""repair_call: every repair kind, each bound and level, nested paths, and the error messages."""

from __future__ import annotations

from typing import Any

from tooldispatch.repair import RepairResult, repair_call
from tooldispatch.toolspec import ToolSpec
from tooldispatch.types import Repair


def test_valid_call_comes_back_unchanged(tools: dict[str, ToolSpec]) -> None:
    """An already valid call is ok, with the same arguments object and no repairs."""
    args = {"location": "Paris", "unit": "celsius", "days": 2}
    result = repair_call("get_weather", args, tools, level="bounded")
    assert result == RepairResult(True, "get_weather", args)
    assert result.arguments is args


def test_key_case_and_separator_repair(tools: dict[str, ToolSpec]) -> None:
    """A key differing only in case or separators is renamed losslessly."""
    result = repair_call("get_weather", {"Location": "Paris"}, tools, level="lossless")
    assert result == RepairResult(
        True, "get_weather", {"location": "Paris"}, (Repair("key", "/Location", "Location", "location", 0),)
    )


def test_key_distance_two_accepted_three_rejected(tools: dict[str, ToolSpec]) -> None:
    """A key two edits away is renamed at bounded; three edits away it stays unknown and is rejected."""
    ok = repair_call("get_weather", {"lcaton": "Paris"}, tools, level="bounded")
    assert ok.arguments == {"location": "Paris"}
    assert ok.repairs == (Repair("key", "/lcaton", "lcaton", "location", 2),)
    bad = repair_call("get_weather", {"lcatn": "Paris"}, tools, level="bounded")
    assert bad.bucket == "SchemaMismatch"
    assert bad.error == (
        'get_weather: invalid arguments: /: missing required argument "location"; declared: location, unit, days; '
        '/: unknown argument(s) "lcatn"; declared: location, unit, days'
    )


def test_lossless_refuses_key_distance_and_says_so(tools: dict[str, ToolSpec]) -> None:
    """At lossless a one-edit key is not renamed, and the error suggests the declared key."""
    result = repair_call("get_weather", {"locaton": "Paris"}, tools, level="lossless")
    assert result.ok is False
    assert result.repairs == ()
    assert result.error == (
        'get_weather: invalid arguments: /: missing required argument "location"; declared: location, unit, days; '
        '/: unknown argument(s) "locaton"; declared: location, unit, days; '
        '/locaton: did you mean "location"? near matches are not applied to this tool'
    )


def test_key_already_present_is_not_overwritten(tools: dict[str, ToolSpec]) -> None:
    """A near key whose target is already given is left alone (and rejected when extras are forbidden)."""
    result = repair_call("get_weather", {"location": "Paris", "Location": "Rome"}, tools, level="bounded")
    assert result.bucket == "SchemaMismatch"
    assert result.arguments == {"location": "Paris", "Location": "Rome"}


def test_unknown_key_kept_when_extras_allowed(tools: dict[str, ToolSpec]) -> None:
    """Without ``additionalProperties: false`` a key that matches nothing is kept."""
    result = repair_call("search_web", {"query": "x"}, tools, level="bounded")
    assert result == RepairResult(True, "search_web", {"query": "x"})


def test_type_coercions_recorded(tools: dict[str, ToolSpec]) -> None:
    """String numbers and booleans are coerced, each edit recorded with its path."""
    args = {"customer": {"id": "42"}, "items": [{"sku": "A", "quantity": "3"}], "express": "true"}
    result = repair_call("place_order", args, tools, level="lossless")
    assert result.ok is True
    assert result.arguments == {"customer": {"id": 42}, "items": [{"sku": "A", "quantity": 3}], "express": True}
    assert result.repairs == (
        Repair("type", "/customer/id", "42", 42),
        Repair("type", "/items/0/quantity", "3", 3),
        Repair("type", "/express", "true", True),
    )


def test_stringified_array_and_scalar_wrap(tools: dict[str, ToolSpec]) -> None:
    """A stringified array is decoded, and a lone string becomes a one-item list for an array of strings."""
    args = {"customer": {"id": 1}, "items": '[{"sku": "A", "quantity": 1}]', "tags": "urgent"}
    result = repair_call("place_order", args, tools, level="lossless")
    assert result.arguments == {"customer": {"id": 1}, "items": [{"sku": "A", "quantity": 1}], "tags": ["urgent"]}
    assert result.repairs == (
        Repair("json_string", "/items", '[{"sku": "A", "quantity": 1}]', [{"sku": "A", "quantity": 1}]),
        Repair("type", "/tags", "urgent", ["urgent"]),
    )


def test_number_is_never_turned_into_a_string(tools: dict[str, ToolSpec]) -> None:
    """An integer where a string is wanted is a schema mismatch, not a coercion."""
    result = repair_call("get_weather", {"location": 75001}, tools, level="bounded")
    assert result.bucket == "SchemaMismatch"
    assert result.error == "get_weather: invalid arguments: /location: expected string, got 75001"


def test_enum_normalized_then_nearest(tools: dict[str, ToolSpec]) -> None:
    """Enum values resolve by normalization losslessly, and by unique nearest at bounded."""
    norm = repair_call("get_weather", {"location": "P", "unit": " Celsius"}, tools, level="lossless")
    assert norm.repairs == (Repair("enum", "/unit", " Celsius", "celsius", 0),)
    near = repair_call("get_weather", {"location": "P", "unit": "farenheit"}, tools, level="bounded")
    assert near.repairs == (Repair("enum", "/unit", "farenheit", "fahrenheit", 1),)


def test_enum_distance_two_accepted_three_lists_allowed_values(tools: dict[str, ToolSpec]) -> None:
    """An enum value two edits away is repaired; three edits away it is rejected with the allowed values."""
    near = repair_call("get_weather", {"location": "P", "unit": "clsus"}, tools, level="bounded")
    assert near.repairs == (Repair("enum", "/unit", "clsus", "celsius", 2),)
    result = repair_call("get_weather", {"location": "P", "unit": "clsu"}, tools, level="bounded")
    assert result.ok is False
    assert result.error == (
        'get_weather: invalid arguments: /unit: "clsu" is not an allowed value; allowed: "celsius", "fahrenheit"'
    )


def test_enum_tie_is_not_guessed(tools: dict[str, ToolSpec]) -> None:
    """An enum value equally near two allowed values is rejected and the tie is named."""
    args = {"customer": {"id": 1}, "items": [{"sku": "A", "quantity": 1, "unit": "bo"}]}
    result = repair_call("place_order", args, tools, level="bounded")
    assert result.ok is True
    assert result.repairs == (Repair("enum", "/items/0/unit", "bo", "box", 1),)
    tools_tie = {"t": ToolSpec("t", parameters={"type": "object", "properties": {"s": {"enum": ["cat", "car"]}}})}
    tie = repair_call("t", {"s": "ca"}, tools_tie, level="bounded")
    assert tie.error == (
        't: invalid arguments: /s: "ca" is not an allowed value; allowed: "cat", "car" '
        '(it is equally close to "cat", "car", so it was not guessed)'
    )


def test_enum_string_spelling_a_number(tools: dict[str, ToolSpec]) -> None:
    """A string that spells a non-string enum member is read as that member."""
    spec = {"t": ToolSpec("t", parameters={"type": "object", "properties": {"n": {"enum": [1, 2, 3]}}})}
    assert repair_call("t", {"n": "2"}, spec, level="lossless").arguments == {"n": 2}


def test_nested_enum_path(tools: dict[str, ToolSpec]) -> None:
    """Repairs inside arrays of objects carry the full path."""
    args = {"customer": {"id": 1, "tier": "Gold"}, "items": [{"sku": "A", "quantity": 1}, {"sku": "B", "Qty": 2}]}
    result = repair_call("place_order", args, tools, level="bounded")
    assert result.repairs[0] == Repair("enum", "/customer/tier", "Gold", "gold", 0)
    assert result.ok is False
    assert result.error == (
        'place_order: invalid arguments: /items/1: missing required argument "quantity"; declared: sku, quantity, unit'
    )


def test_null_optional_dropped_required_null_rejected(tools: dict[str, ToolSpec]) -> None:
    """A null optional is dropped; a null required stays and is reported with the expected type."""
    result = repair_call("get_weather", {"location": "Paris", "unit": None}, tools, level="lossless")
    assert result == RepairResult(
        True, "get_weather", {"location": "Paris"}, (Repair("null_optional", "/unit", None, None),)
    )
    bad = repair_call("get_weather", {"location": None}, tools, level="bounded")
    assert bad.error == "get_weather: invalid arguments: /location: expected string, got null"


def test_nullable_optional_keeps_null(tools: dict[str, ToolSpec]) -> None:
    """A null for an optional that allows null is kept as is."""
    args: dict[str, Any] = {"customer": {"id": 1}, "items": [], "note": None}
    assert repair_call("place_order", args, tools, level="bounded") == RepairResult(True, "place_order", args)


def test_arguments_as_json_string(tools: dict[str, ToolSpec]) -> None:
    """Arguments given as a JSON string are decoded, recorded as json_string at the root."""
    result = repair_call("get_weather", '{"location": "Paris"}', tools, level="lossless")
    assert result == RepairResult(
        True,
        "get_weather",
        {"location": "Paris"},
        (Repair("json_string", "", '{"location": "Paris"}', {"location": "Paris"}),),
    )


def test_level_none_makes_no_edits(tools: dict[str, ToolSpec]) -> None:
    """At level none a stringified number and a JSON-string argument object are rejected, not repaired."""
    num = repair_call("get_weather", {"location": "P", "days": "2"}, tools, level="none")
    assert (num.repairs, num.error) == ((), 'get_weather: invalid arguments: /days: expected integer, got "2"')
    text = repair_call("get_weather", '{"location": "P"}', tools, level="none")
    assert text.error == "get_weather: arguments must be a JSON object, got string"


def test_non_object_arguments_are_schema_mismatch(tools: dict[str, ToolSpec]) -> None:
    """Arguments that decode to something other than an object are rejected."""
    result = repair_call("get_weather", "[1, 2]", tools, level="bounded")
    assert result.bucket == "SchemaMismatch"
    assert result.error == "get_weather: arguments must be a JSON object, got array"
    assert repair_call("get_weather", "nope", tools, level="bounded").error == (
        "get_weather: arguments must be a JSON object, got string that is not valid JSON"
    )


def test_missing_arguments_read_as_empty_object(tools: dict[str, ToolSpec]) -> None:
    """``None`` arguments mean none were given: fine for a tool with no required arguments."""
    assert repair_call("search_web", None, tools, level="none") == RepairResult(True, "search_web", {})


def test_unknown_name_lists_tools_nearest_first(tools: dict[str, ToolSpec]) -> None:
    """An unresolvable name is UnknownName and lists the declared tools nearest first (equals in declared order)."""
    result = repair_call("book_flight", {}, tools, level="bounded")
    assert result.bucket == "UnknownName"
    assert result.name is None
    assert result.error == (
        'unknown tool "book_flight"; declared tools: get_weather, get_forecast, place_order, search_web'
    )


def test_unknown_name_at_lossless_suggests(tools: dict[str, ToolSpec]) -> None:
    """At lossless a typo in the name is not repaired; the error suggests the declared name."""
    result = repair_call("place_ordr", {}, tools, level="lossless")
    assert result.error == (
        'unknown tool "place_ordr" (did you mean "place_order"? near matches are not applied to this tool); '
        "declared tools: place_order, get_weather, search_web, get_forecast"
    )


def test_missing_name(tools: dict[str, ToolSpec]) -> None:
    """A call without a name is UnknownName with every declared tool listed."""
    assert repair_call(None, {}, tools, level="bounded").error == (
        "the call names no tool; declared tools: get_weather, get_forecast, place_order, search_web"
    )


def test_name_repair_then_arguments(tools: dict[str, ToolSpec]) -> None:
    """Name repairs come first in the record, then argument repairs."""
    result = repair_call("Place-Order", {"customer": {"id": 1}, "itemz": []}, tools, level="bounded")
    assert result.ok is True
    assert result.name == "place_order"
    assert result.repairs == (
        Repair("name", "", "Place-Order", "place_order", 0),
        Repair("key", "/itemz", "itemz", "items", 1),
    )


def test_single_object_wrapped_for_array_of_objects(tools: dict[str, ToolSpec]) -> None:
    """One object where an array of such objects is wanted becomes a one-item list, then is repaired inside."""
    args = {"customer": {"id": 1}, "items": {"sku": "A", "quantity": "2"}}
    result = repair_call("place_order", args, tools, level="lossless")
    assert result.arguments == {"customer": {"id": 1}, "items": [{"sku": "A", "quantity": 2}]}
    assert result.repairs == (
        Repair("type", "/items", {"sku": "A", "quantity": "2"}, [{"sku": "A", "quantity": "2"}]),
        Repair("type", "/items/0/quantity", "2", 2),
    )


def test_nullable_branch_coerces_non_null_value() -> None:
    """For ``anyOf: [integer, null]`` a string number is coerced with the integer branch."""
    schema = {"type": "object", "properties": {"n": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}}
    result = repair_call("t", {"n": "7"}, {"t": ToolSpec("t", parameters=schema)}, level="lossless")
    assert (result.arguments, result.repairs) == ({"n": 7}, (Repair("type", "/n", "7", 7),))


def test_additional_properties_schema_guides_repair() -> None:
    """Values of undeclared keys are repaired against an ``additionalProperties`` schema."""
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    result = repair_call("t", {"a": "5"}, {"t": ToolSpec("t", parameters=schema)}, level="lossless")
    assert (result.ok, result.arguments) == (True, {"a": 5})


def test_unknown_name_tie_is_named() -> None:
    """A name equally near two tools is UnknownName and the error names the tie."""
    tools = {n: ToolSpec(n) for n in ("get_cat", "get_car")}
    assert repair_call("get_ca", {}, tools, level="bounded").error == (
        'unknown tool "get_ca" (it is equally close to "get_cat", "get_car", so it was not guessed); '
        "declared tools: get_cat, get_car"
    )


def test_two_wrong_keys_do_not_claim_one_property(tools: dict[str, ToolSpec]) -> None:
    """When two keys could both stand for one property, only the first is renamed."""
    result = repair_call("get_weather", {"Location": "Paris", "LOCATION": "Rome"}, tools, level="bounded")
    assert result.repairs == (Repair("key", "/Location", "Location", "location", 0),)
    assert result.bucket == "SchemaMismatch"


def test_value_json_cannot_hold_is_not_wrapped(tools: dict[str, ToolSpec]) -> None:
    """A set where an array is wanted is not wrapped into a list; validation rejects it."""
    args = {"customer": {"id": 1}, "items": [], "tags": {"a"}}
    result = repair_call("place_order", args, tools, level="bounded")
    assert (result.ok, result.repairs) == (False, ())
    assert result.error == "place_order: invalid arguments: /tags: expected array, got {'a'}"


def test_a_schema_that_turns_the_arguments_into_another_type_is_a_mismatch() -> None:
    """A top-level schema that only accepts an array (through anyOf) never makes the arguments a list."""
    spec = ToolSpec("tag", "", {"anyOf": [{"type": "array", "items": {"type": "object"}}]})
    args = {"label": "x"}
    result = repair_call("tag", args, {"tag": spec}, level="bounded")
    assert result == RepairResult(
        False,
        "tag",
        args,
        (),
        "SchemaMismatch",
        "tag: the tool's parameters schema does not accept an object, and arguments are always one",
    )
