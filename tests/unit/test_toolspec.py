"""Tool declarations normalize from every accepted form."""

import pytest

from tooldispatch.errors import ConfigError
from tooldispatch.toolspec import ToolSpec, normalize_tools

WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def test_openai_and_bare_forms_normalize_alike() -> None:
    """The OpenAI tools-list entry and the bare function dict give the same ToolSpec."""
    a = normalize_tools([{"type": "function", "function": WEATHER}])
    b = normalize_tools([WEATHER])
    assert a == b
    assert list(a) == ["get_weather"]
    assert a["get_weather"].required == frozenset({"city"})
    assert set(a["get_weather"].properties) == {"city"}


def test_missing_parameters_means_no_arguments() -> None:
    """A tool without parameters takes an empty object."""
    spec = normalize_tools([{"name": "ping"}])["ping"]
    assert spec.parameters == {"type": "object", "properties": {}}
    assert spec.required == frozenset()


def test_nameless_tool_is_a_config_error() -> None:
    """A tool without a name is rejected with a message that shows the expected shape."""
    with pytest.raises(ConfigError, match="has no name"):
        normalize_tools([{"type": "function", "function": {"parameters": {}}}])


def test_round_trip_to_openai() -> None:
    """``to_openai`` gives back the OpenAI tools-list entry."""
    spec = ToolSpec(name="get_weather", description="Weather for a city", parameters=WEATHER["parameters"])
    assert spec.to_openai() == {"type": "function", "function": WEATHER}
