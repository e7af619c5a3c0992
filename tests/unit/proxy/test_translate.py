"""The proxy's request checks and answer shapes, as pure functions of plain dicts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tooldispatch.backends.base import Omit
from tooldispatch.proxy.errors import ProxyError
from tooldispatch.proxy.translate import Limits, ToolCache, completion_json, read_request
from tooldispatch.types import ToolCall

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ASK = [{"role": "user", "content": "Weather in Paris?"}]


def read(body: dict[str, Any], *, constrained: bool = False, limits: Limits | None = None) -> Any:
    """``read_request`` with the default limits."""
    return read_request(body, limits=limits or Limits(), constrained=constrained)


def rejected(body: Any, **kwargs: Any) -> ProxyError:
    """The 400 that ``read_request`` raises for ``body``."""
    with pytest.raises(ProxyError) as info:
        read(body, **kwargs)
    assert info.value.status == 400
    return info.value


def test_plain_request_keeps_every_unhandled_field_for_the_upstream() -> None:
    """Fields the proxy does not read (top_p, response_format, vendor fields) go to the upstream as sent."""
    req = read({"model": "m", "messages": ASK, "top_p": 0.5, "chat_template_kwargs": {"enable_thinking": False}})
    assert req.chat.extra["top_p"] == 0.5
    assert req.chat.extra["chat_template_kwargs"] == {"enable_thinking": False}
    assert "model" not in req.chat.extra and "messages" not in req.chat.extra
    assert req.tools == () and req.parses is False and req.stream is False


def test_unset_sampling_fields_are_left_out_of_the_upstream_body() -> None:
    """max_tokens, temperature and seed the client did not send are omitted, so the upstream's defaults apply."""
    req = read({"messages": ASK})
    assert all(isinstance(req.chat.extra[k], Omit) for k in ("max_tokens", "temperature", "seed"))
    sent = read({"messages": ASK, "max_tokens": 7, "temperature": 0.3, "seed": 5})
    assert (sent.chat.max_tokens, sent.chat.temperature, sent.chat.seed) == (7, 0.3, 5)
    assert not any(k in sent.chat.extra for k in ("max_tokens", "temperature", "seed"))


def test_max_completion_tokens_wins_over_max_tokens() -> None:
    """The newer max_completion_tokens is the budget when both are sent."""
    assert read({"messages": ASK, "max_tokens": 9, "max_completion_tokens": 3}).chat.max_tokens == 3


def test_tools_and_choices_are_read() -> None:
    """Tools become ToolSpecs; tool_choice reads all four forms; parallel_tool_calls false is kept."""
    req = read({"messages": ASK, "tools": [WEATHER], "parallel_tool_calls": False, "stream": True})
    assert [t.name for t in req.tools] == ["get_weather"]
    assert (req.tool_choice, req.parallel, req.parses, req.stream) == ("auto", False, True, True)
    for raw, expected in (
        ("none", "none"),
        ("auto", "auto"),
        ("required", "required"),
        ({"type": "function", "function": {"name": "get_weather"}}, "get_weather"),
    ):
        assert read({"messages": ASK, "tools": [WEATHER], "tool_choice": raw}).tool_choice == expected
    assert read({"messages": ASK, "tools": [WEATHER], "tool_choice": "none"}).parses is False


def test_grammar_constraint_only_for_required_or_named_on_a_constrained_upstream() -> None:
    """constrained is set for required and a named tool when the upstream has a grammar, never for auto."""
    base = {"messages": ASK, "tools": [WEATHER]}
    assert read({**base, "tool_choice": "required"}, constrained=True).chat.constrained is True
    named = {**base, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}
    assert read(named, constrained=True).chat.constrained is True
    assert read(named, constrained=True).chat.tool_choice == "get_weather"
    assert read(base, constrained=True).chat.constrained is False
    assert read({**base, "tool_choice": "required"}, constrained=False).chat.constrained is False


def test_include_usage_only_when_streaming_and_asked() -> None:
    """stream_options.include_usage is honoured for streams only."""
    assert read({"messages": ASK, "stream": True, "stream_options": {"include_usage": True}}).include_usage is True
    assert read({"messages": ASK, "stream_options": {"include_usage": True}}).include_usage is False


@pytest.mark.parametrize(
    ("body", "says", "param"),
    [
        ([], "JSON object", None),
        ({"messages": []}, "'messages' must be a non-empty list", "messages"),
        ({"messages": ASK, "n": 2}, "one choice per request", "n"),
        ({"messages": ASK, "functions": [{"name": "f"}]}, "legacy API", None),
        ({"messages": ASK, "max_tokens": "9"}, "'max_tokens' must be an integer", "max_tokens"),
        ({"messages": ASK, "tools": {"a": 1}}, "'tools' must be a list", "tools"),
        ({"messages": ASK, "tools": [WEATHER], "tool_choice": "sometimes"}, "tool_choice must be", "tool_choice"),
    ],
)
def test_malformed_requests_are_400_saying_what_is_wrong(body: Any, says: str, param: str | None) -> None:
    """Each malformed body gets a 400 whose message names the fault and whose param names the field."""
    err = rejected(body)
    assert says in err.message
    assert err.param == param


def test_tool_choice_naming_an_undeclared_tool_is_400() -> None:
    """A named tool_choice must be one of the request's tools."""
    err = rejected(
        {"messages": ASK, "tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "x"}}}
    )
    assert err.message == "tool_choice names 'x', which is not among the request's tools"


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        (
            {"type": "function", "function": {"name": "bad name!", "parameters": {"type": "object"}}},
            "tool 'bad name!' (tools[1]): a name is 1 to 64 letters, digits, '_', '-', '.' or ':'",
        ),
        (
            {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
            "tool 'get_weather' is declared twice (tools[1]); give each tool a unique name",
        ),
        (
            {
                "type": "function",
                "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": 5}}}},
            },
            "tool 'f' (tools[1]): 'parameters' is not a valid JSON Schema at /properties/a/type: 5 is not valid under "
            "any of the given schemas",
        ),
        (
            {"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}},
            "tools[1]: tool 'f': 'parameters' must describe an object (\"type\": \"object\"), not 'string': a call's "
            "arguments are always a JSON object",
        ),
        ({"type": "retrieval"}, "tools[1] has type 'retrieval'; only 'function' tools are supported"),
        ("get_weather", "tools[1] must be an object, not str"),
    ],
)
def test_invalid_tools_are_400_naming_the_tool_and_why(tool: Any, message: str) -> None:
    """Every invalid declaration is refused with the tool's name (or position) and the reason."""
    err = rejected({"messages": ASK, "tools": [WEATHER, tool]})
    assert err.message == message
    assert err.param == "tools[1]"


def test_tool_count_is_bounded() -> None:
    """More tools than --max-tools is a 400 that names the bound."""
    tools = [{"type": "function", "function": {"name": f"t{i}"}} for i in range(3)]
    err = rejected({"messages": ASK, "tools": tools}, limits=Limits(max_tools=2))
    assert err.message == "the request declares 3 tools; this proxy accepts at most 2 (--max-tools)"


def test_completion_carries_native_calls_content_and_both_reasoning_fields() -> None:
    """An answer with calls: ids unique, arguments a JSON string, content null when empty, finish tool_calls."""
    calls = [ToolCall("get_weather", {"city": "Paris"}), ToolCall("get_weather", {"city": "Lyon"})]
    answer = completion_json(model="m", content="", reasoning="why", calls=calls, finish_reason="stop", usage=None)
    choice = answer["choices"][0]
    message = choice["message"]
    assert choice["finish_reason"] == "tool_calls"
    assert message["content"] is None
    assert message["reasoning_content"] == message["reasoning"] == "why"
    assert [json.loads(c["function"]["arguments"]) for c in message["tool_calls"]] == [
        {"city": "Paris"},
        {"city": "Lyon"},
    ]
    ids = [c["id"] for c in message["tool_calls"]]
    assert len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)
    plain = completion_json(model="m", content="hi", reasoning="", calls=[], finish_reason=None, usage=None)
    assert plain["choices"][0]["message"] == {"role": "assistant", "content": "hi"}
    assert plain["choices"][0]["finish_reason"] == "stop"


def test_tool_cache_gives_the_same_specs_for_the_same_list() -> None:
    """A tools list sent again (a new, equal body) gets the very ToolSpec tuple checked the first time."""
    cache = ToolCache()
    first = read_request({"messages": ASK, "tools": [WEATHER]}, limits=Limits(), constrained=False, tool_cache=cache)
    again = read_request(
        json.loads(json.dumps({"messages": ASK, "tools": [WEATHER]})),
        limits=Limits(),
        constrained=False,
        tool_cache=cache,
    )
    assert again.tools is first.tools
    assert len(cache) == 1


def test_tool_cache_checks_a_changed_list_afresh() -> None:
    """Any change in any tool (description, a schema keyword, a new tool) is a new entry with its own specs."""
    cache = ToolCache()
    first = cache.check([WEATHER], max_tools=8)
    described = json.loads(json.dumps(WEATHER))
    described["function"]["description"] = "Weather now."
    narrowed = json.loads(json.dumps(WEATHER))
    narrowed["function"]["parameters"]["properties"]["city"]["maxLength"] = 40
    other = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object"}}}
    assert cache.check([described], max_tools=8)[0].description == "Weather now."
    assert cache.check([narrowed], max_tools=8)[0].parameters["properties"]["city"] == {
        "type": "string",
        "maxLength": 40,
    }
    assert [t.name for t in cache.check([WEATHER, other], max_tools=8)] == ["get_weather", "get_time"]
    assert first[0].description == "Current weather for a city." and "maxLength" not in str(first[0].parameters)
    assert len(cache) == 4


def test_tool_cache_never_keeps_a_rejected_list() -> None:
    """A list that fails its check is rejected every time it comes, also after a good list with the same name."""
    cache = ToolCache()
    cache.check([WEATHER], max_tools=8)
    broken = json.loads(json.dumps(WEATHER))
    broken["function"]["parameters"]["properties"]["city"]["type"] = "town"
    for _ in range(2):
        with pytest.raises(ProxyError) as info:
            cache.check([broken], max_tools=8)
        assert info.value.status == 400 and "get_weather" in info.value.message
    assert len(cache) == 1


def test_tool_cache_still_bounds_the_tool_count() -> None:
    """A list checked under a higher max_tools is still refused when over the request's bound."""
    cache = ToolCache()
    cache.check([WEATHER], max_tools=8)
    with pytest.raises(ProxyError) as info:
        cache.check([WEATHER], max_tools=0)
    assert "at most 0" in info.value.message


def test_tool_cache_specs_do_not_share_the_request_body() -> None:
    """The cached specs are built from a copy of the list: changing the first request's body changes no spec."""
    cache = ToolCache()
    sent = json.loads(json.dumps([WEATHER]))
    specs = cache.check(sent, max_tools=8)
    sent[0]["function"]["parameters"]["properties"]["city"]["type"] = "integer"
    assert specs[0].parameters["properties"]["city"] == {"type": "string"}
    assert cache.check([WEATHER], max_tools=8) is specs


def test_tool_cache_is_bounded() -> None:
    """At most max_entries lists are kept (the oldest goes), and a list over max_bytes as a key is not kept."""
    cache = ToolCache(max_entries=2, max_bytes=400)
    lists = [[{"type": "function", "function": {"name": f"tool_{i}"}}] for i in range(3)]
    kept = [cache.check(tools, max_tools=8) for tools in lists]
    assert len(cache) == 2
    assert cache.check(lists[2], max_tools=8) is kept[2]
    assert cache.check(lists[0], max_tools=8) is not kept[0]
    big = [{"type": "function", "function": {"name": "big", "description": "x" * 500}}]
    assert cache.check(big, max_tools=8)[0].name == "big"
    assert cache.check(big, max_tools=8) is not cache.check(big, max_tools=8)


def test_tool_cache_tells_json_values_of_equal_python_value_apart() -> None:
    """1, 1.0 and true in a schema are different lists to the cache (Python finds them equal, JSON Schema does not)."""
    cache = ToolCache()
    forms = []
    for value in (1, 1.0, True):
        tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "const_x": value}}}
        forms.append(cache.check([tool], max_tools=8)[0].parameters["const_x"])
    assert [type(v) for v in forms] == [int, float, bool]
    assert len(cache) == 3
