"""Validation messages name the field path, the value passed and what the schema expects."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest

from tooldispatch.dispatch import Dispatcher, Registry
from tooldispatch.dispatch.validate import validate_args

SCHEMA = {
    "type": "object",
    "properties": {
        "zone": {"type": "string"},
        "limit": {"type": "integer"},
        "unit": {"enum": ["km", "mi"]},
        "stops": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}}}},
    },
    "required": ["zone"],
    "additionalProperties": False,
}


@pytest.fixture
def strict_tool() -> Any:
    reg = Registry()
    return reg.register("route", lambda **kw: kw, schema=SCHEMA, read_only=True, repair="none")


def test_wrong_type_message(strict_tool: Any) -> None:
    """A wrong type names the path, the value with its JSON type, and the expected type."""
    v = validate_args(strict_tool, {"zone": "north", "limit": "ten"})
    assert v.errors == ('/limit: passed "ten" (string), expected integer',)


def test_missing_required_message(strict_tool: Any) -> None:
    """A missing required argument is named with its expected type."""
    assert validate_args(strict_tool, {}).errors == ("missing required argument /zone (expected string)",)


def test_null_required_is_an_error(strict_tool: Any) -> None:
    """null for a required argument is not treated as absent: it fails with the expected type."""
    assert validate_args(strict_tool, {"zone": None}).errors == ("/zone: passed null (null), expected string",)


def test_null_and_missing_optionals_are_absent(strict_tool: Any) -> None:
    """A null optional is dropped (and noted) instead of failing; missing optionals are fine."""
    v = validate_args(strict_tool, {"zone": "n", "limit": None})
    assert (v.ok, v.args) == (True, {"zone": "n"})
    assert v.repairs == ({"kind": "null_optional", "path": "/limit", "before": None, "after": "(absent)"},)


def test_enum_message_lists_allowed_values(strict_tool: Any) -> None:
    """An enum mismatch lists every allowed value."""
    assert validate_args(strict_tool, {"zone": "n", "unit": "miles"}).errors == (
        '/unit: passed "miles", expected one of "km", "mi"',
    )


def test_nested_path(strict_tool: Any) -> None:
    """Errors inside arrays carry the full path with indices."""
    assert validate_args(strict_tool, {"zone": "n", "stops": [{"id": "a"}, {"id": 7}]}).errors == (
        "/stops/1/id: passed 7 (integer), expected string",
    )


def test_unexpected_argument_lists_allowed(strict_tool: Any) -> None:
    """An unknown key is named with the allowed keys."""
    assert validate_args(strict_tool, {"zone": "n", "colour": "red"}).errors == (
        "unexpected argument(s) colour at arguments; expected only: limit, stops, unit, zone",
    )


def test_non_object_arguments(strict_tool: Any) -> None:
    """Arguments that are not an object are rejected with their type."""
    assert validate_args(strict_tool, [1, 2]).errors == ("arguments: passed [1, 2] (array), expected an object",)


def test_dispatch_rejects_invalid_json_text() -> None:
    """Arguments given as text that is not JSON are rejected as validation, never run."""
    reg = Registry()
    reg.register("route", lambda **kw: kw, schema=SCHEMA, read_only=True)
    d = Dispatcher(reg)
    r = d.dispatch("route", '{"zone": ')
    assert (r.status, r.reason) == ("rejected", "validation")
    assert json.loads(r.content)["message"].startswith("the arguments are not valid JSON (")


def test_dispatch_validation_envelope() -> None:
    """The validation error reaches the model as the JSON envelope with the precise message."""
    ran: list[int] = []
    reg = Registry()
    reg.register("route", lambda **kw: ran.append(1), schema=SCHEMA, read_only=True, repair="none")
    r = Dispatcher(reg).dispatch("route", {"zone": 3})
    assert json.loads(r.content) == {
        "error": "validation",
        "tool": "route",
        "message": "/zone: passed 3 (integer), expected string",
        "recoverable": True,
        "attempts": 0,
        "retried": False,
        "suggestion": "fix the arguments as described and call again",
    }
    assert ran == []


def test_side_effecting_tools_get_only_lossless_repair() -> None:
    """A side-effecting tool gets "5" → 5 silently, but an enum typo is a validation error, not a guess."""
    reg = Registry()
    tool = reg.register("route", lambda **kw: kw, schema=SCHEMA, read_only=False)
    assert tool.repair == "lossless"
    fixed = validate_args(tool, {"zone": "n", "limit": "5"})
    assert (fixed.ok, fixed.args) == (True, {"zone": "n", "limit": 5})
    assert validate_args(tool, {"zone": "n", "unit": "kmm"}).errors == (
        '/unit: passed "kmm", expected one of "km", "mi"',
    )


def test_read_only_and_opted_in_tools_get_bounded_repair() -> None:
    """Read-only tools, and side-effecting ones registered with repair='bounded', accept a near enum match."""
    reg = Registry()
    ro = reg.register("a", lambda **kw: kw, schema=SCHEMA, read_only=True)
    opted = reg.register("b", lambda **kw: kw, schema=SCHEMA, read_only=False, repair="bounded")
    for tool in (ro, opted):
        v = validate_args(tool, {"zone": "n", "unit": "kmm"})
        assert (v.ok, v.args) == (True, {"zone": "n", "unit": "km"})


@pytest.mark.parametrize(
    ("name", "args", "where", "recorded"),
    [
        ("send_message", {"to": "ana", "subject": "hi", "body": "a\ud800b"}, "arguments/body", "a\\ud800b"),
        ("send_message", '{"to": "ana", "subject": "hi", "body": "a\\udc00"}', "arguments/body", "a\\udc00"),
        ("refresh_drivers", {"note\udfff": 1}, "arguments/note\\udfff", "note\\udfff"),
        ("refresh\ud800", {}, "the tool name or call id", "refresh\\ud800"),
    ],
)
def test_unpaired_surrogates_are_rejected_and_recorded_as_text(
    dispatcher: Dispatcher, world: Any, name: str, args: Any, where: str, recorded: str
) -> None:
    """A lone UTF-16 surrogate (valid JSON, not text) is a validation error; the call is recorded escaped."""
    result = dispatcher.dispatch(name, args, session_id="s1", call_id="c1")
    envelope = json.loads(result.content)
    assert (result.status, envelope["error"]) == ("rejected", "validation")
    assert (
        envelope["message"]
        == f"{where} holds an unpaired UTF-16 surrogate escape (\\ud800 to \\udfff), which is not text"
    )
    assert sum(world.calls.values()) == 0
    (trace,) = dispatcher.traces(session_id="s1")
    stored = json.dumps(trace.to_dict(), ensure_ascii=False)
    stored.encode("utf-8")  # no surrogate is left to break the store
    assert recorded in [trace.tool, *trace.params, *map(str, trace.params.values())]


def test_arguments_nested_too_deeply_are_rejected_without_recursion(dispatcher: Dispatcher, world: Any) -> None:
    """Arguments nested past the limit (a model stuck repeating brackets) are refused, not a RecursionError."""
    from tooldispatch.dispatch.validate import MAX_DEPTH

    deep: Any = "x"
    for _ in range(5000):
        deep = [deep]
    result = dispatcher.dispatch("send_message", {"to": deep, "subject": "s", "body": "b"}, session_id="s1")
    envelope = json.loads(result.content)
    assert (result.status, envelope["error"]) == ("rejected", "validation")
    assert envelope["message"] == f"arguments/to nests objects or arrays more than {MAX_DEPTH} levels deep"
    text = dispatcher.dispatch("send_message", "[" * 5000 + "]" * 5000, session_id="s1")
    assert (text.status, json.loads(text.content)["error"]) == ("rejected", "validation")
    assert world.calls["send_message"] == 0
    assert len(dispatcher.traces(session_id="s1")) == 2


def test_depth_limit_counts_nested_objects_and_arrays() -> None:
    """Arguments nested exactly to the limit are readable; one level more is reported with its path."""
    from tooldispatch.dispatch.validate import MAX_DEPTH, unreadable

    def nested(levels: int) -> Any:
        value: Any = 1
        for i in range(levels):
            value = [value] if i % 2 else {"k": value}
        return value

    assert unreadable(nested(MAX_DEPTH)) is None
    kind, path = unreadable(nested(MAX_DEPTH + 1)) or ("", "")
    assert kind == "deep"
    assert path.count("/") == MAX_DEPTH
    assert unreadable({"a": ["ok", {"b\udc00": 1}]}, "arguments") == ("surrogate", "arguments/a/1/b\udc00")


def _parsed(reg: Registry, text: str) -> Any:
    from tooldispatch import parse_tool_calls

    (call,) = parse_tool_calls(text, reg.specs()).calls
    return call


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "route", "arguments": {"zone": "n", "limit": 1}}</tool_call>',  # the fast lane
        'I will route.\n<tool_call>\n{"name": "route", "arguments": {"zone": "n", "limit": 1}}\n</tool_call>',
        '[route(zone="n", limit=1)]',  # the cascade
    ],
)
def test_a_parsed_call_carries_the_stamp_of_its_tool_schema(text: str) -> None:
    """Every accepted parsed call is stamped against its tool's compiled schema, with its arguments as they were."""
    from tooldispatch.repair.validate import still_valid

    reg = Registry()
    reg.register("route", lambda **kw: kw, schema=SCHEMA, read_only=True, repair="none")
    call = _parsed(reg, text)
    assert call.arguments == {"zone": "n", "limit": 1}
    assert still_valid(call.checked, reg["route"].schema, call.arguments)


def test_a_streamed_call_carries_the_stamp_of_its_tool_schema() -> None:
    """A call the stream parser reports as ready is stamped as the whole-text parser stamps it."""
    from tooldispatch.parsing.stream import CallReady, StreamParser
    from tooldispatch.repair.validate import still_valid

    reg = Registry()
    reg.register("route", lambda **kw: kw, schema=SCHEMA, read_only=True, repair="none")
    parser = StreamParser(reg.specs())
    text = 'Routing.\n<tool_call>{"name": "route", "arguments": {"zone": "n", "limit": 1}}</tool_call>'
    events = [e for i in range(0, len(text), 7) for e in parser.feed(text[i : i + 7])] + list(parser.close("stop"))
    (call,) = [e.call for e in events if isinstance(e, CallReady)]
    assert call.arguments == {"zone": "n", "limit": 1}
    assert still_valid(call.checked, reg["route"].schema, call.arguments)


def test_a_stamped_call_is_not_validated_again() -> None:
    """The dispatcher runs a call whose stamp vouches for these arguments against this tool's schema as it is."""
    from tooldispatch.repair.validate import stamp
    from tooldispatch.types import ToolCall

    reg = Registry()
    reg.register("route", lambda **kw: kw, schema=SCHEMA, read_only=True, repair="none")
    forged = {"zone": 5}  # invalid, stamped anyway: only a stamp can let it through
    call = ToolCall("route", forged, checked=stamp(reg["route"].schema, forged))
    with Dispatcher(reg) as d:
        (trusted,) = d.dispatch_many([call])
        (unstamped,) = d.dispatch_many([("route", {"zone": 5})])
    assert (trusted.status, trusted.value) == ("ok", {"zone": 5})
    assert (unstamped.status, unstamped.reason) == ("rejected", "validation")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda a: a.update(limit="ten"), '/limit: passed "ten" (string), expected integer'),
        (lambda a: a.update(limit=True), "/limit: passed true (boolean), expected integer"),
        (lambda a: a.update(zone=None), "/zone: passed null (null), expected string"),
    ],
)
def test_a_call_changed_after_parsing_is_validated(change: Any, message: str) -> None:
    """Arguments changed in place after parsing (``True`` for ``1`` too) lose the stamp's trust and are checked."""
    reg = Registry()
    reg.register("route", lambda **kw: kw, schema=SCHEMA, read_only=True, repair="none")
    call = _parsed(reg, '<tool_call>{"name": "route", "arguments": {"zone": "n", "limit": 1}}</tool_call>')
    change(call.arguments)
    with Dispatcher(reg) as d:
        (result,) = d.dispatch_many([call])
        direct = d.dispatch(call.name, call.arguments, checked=call.checked)
    assert (result.status, result.reason, json.loads(result.content)["message"]) == ("rejected", "validation", message)
    assert (direct.status, direct.reason) == ("rejected", "validation")


def test_a_stamp_for_another_schema_is_not_trusted() -> None:
    """A call stamped against one tool's schema is validated when it is dispatched to a tool with another."""
    from tooldispatch.repair.validate import stamp

    reg = Registry()
    reg.register("route", lambda **kw: kw, schema=SCHEMA, read_only=True, repair="none")
    other = {"type": "object", "properties": {"zone": {"type": "integer"}}}
    with Dispatcher(reg) as d:
        result = d.dispatch("route", {"zone": 5}, checked=stamp(other, {"zone": 5}))
    assert (result.status, result.reason) == ("rejected", "validation")


def test_a_parsed_call_with_a_null_optional_runs_without_it() -> None:
    """A stamped call holding ``null`` for a nullable optional still has it dropped, as an unstamped call does."""
    reg = Registry()
    schema = {"type": "object", "properties": {"zone": {"type": "string"}, "note": {"type": ["string", "null"]}}}
    reg.register("route", lambda **kw: kw, schema=schema, read_only=True, repair="none")
    call = _parsed(reg, '<tool_call>{"name": "route", "arguments": {"zone": "n", "note": null}}</tool_call>')
    assert call.checked is not None
    with Dispatcher(reg) as d:
        (result,) = d.dispatch_many([call])
    assert (result.status, result.value) == ("ok", {"zone": "n"})
    assert [r["kind"] for r in result.trace.repairs] == ["null_optional"]


def test_a_schema_left_open_for_a_function_without_kwargs_is_closed() -> None:
    """A function that takes no **kwargs cannot take a key its schema does not declare: the schema is closed, the
    key is refused at validation with the declared arguments named, and the function never runs. A **kwargs
    function, and a schema that says what it allows, keep theirs; a functools.wraps wrapper is read as its target."""
    ran: list[dict[str, Any]] = []

    def ls(a: bool = False, path: str = ".") -> str:
        ran.append({"a": a, "path": path})
        return "ok"

    @functools.wraps(ls)
    def wrapped(**arguments: Any) -> Any:
        return ls(**arguments)

    schema = {"type": "object", "properties": {"a": {"type": "boolean"}, "path": {"type": "string"}}}
    reg = Registry()
    closed = reg.register("ls", ls, schema=schema, read_only=True, repair="none")
    through = reg.register("ls_wrapped", wrapped, schema=schema, read_only=True, repair="none")
    kwargs = reg.register("ls_kwargs", lambda **kw: kw, schema=schema, read_only=True, repair="none")
    allowed = reg.register("ls_open", ls, schema={**schema, "additionalProperties": True}, read_only=True)
    assert [t.schema.get("additionalProperties") for t in (closed, through, kwargs, allowed)] == [
        False,
        False,
        None,
        True,
    ]
    assert schema == {"type": "object", "properties": {"a": {"type": "boolean"}, "path": {"type": "string"}}}
    with Dispatcher(reg) as d:
        refused = d.dispatch("ls", {"a": True, "human_readable": False})
        through_refused = d.dispatch("ls_wrapped", {"human_readable": False})
        passed = d.dispatch("ls_kwargs", {"a": True, "human_readable": False})
    assert (refused.status, refused.reason, through_refused.status, passed.status) == (
        "rejected",
        "validation",
        "rejected",
        "ok",
    )
    assert "human_readable" in json.loads(refused.content)["message"]
    assert ran == []
