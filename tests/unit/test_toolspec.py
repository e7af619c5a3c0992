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


@pytest.mark.parametrize(
    ("tools", "message"),
    [
        ("get_weather", "tools must be a list of tool declarations, not str"),
        (7, "tools must be a list of tool declarations, not int"),
        ([WEATHER, 3], "a tool entry must be an object or a ToolSpec, not int: 3"),
        (
            {"type": "function", "function": WEATHER},
            "tools given as a mapping must map names to ToolSpec, but 'type' maps to str; pass the OpenAI tools "
            'list ([{"type": "function", "function": {...}}, ...]) instead',
        ),
    ],
)
def test_tools_of_another_form_are_a_config_error(tools: object, message: str) -> None:
    """A single tool dict, a string or a stray value is named, never silently read as no tools."""
    with pytest.raises(ConfigError) as caught:
        normalize_tools(tools)  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_a_mapping_of_specs_is_kept_as_given() -> None:
    """``{name: ToolSpec}`` is the normalized form already."""
    specs = normalize_tools([WEATHER])
    assert normalize_tools(specs) == specs
    assert normalize_tools(specs) is not specs


@pytest.mark.parametrize("text", [b"<tool_call>{}</tool_call>", 42])
def test_text_that_is_not_a_string_is_a_type_error(text: object) -> None:
    """parse_tool_calls takes the output as text; bytes are decoded by the caller."""
    from tooldispatch import parse_tool_calls

    with pytest.raises(TypeError, match=f"^text must be the model's output as a str, not {type(text).__name__}; "):
        parse_tool_calls(text, [WEATHER])  # type: ignore[arg-type]


@pytest.mark.parametrize("declared", ["array", "string", ["array", "null"]])
def test_parameters_that_are_not_an_object_are_a_config_error(declared: object) -> None:
    """A call's arguments are always a JSON object, so a parameters schema of another type is rejected."""
    tool = {"name": "tag", "parameters": {"type": declared, "items": {"type": "string"}}}
    with pytest.raises(
        ConfigError, match=r"^tool 'tag': 'parameters' must describe an object \(\"type\": \"object\"\)"
    ):
        normalize_tools([tool])


@pytest.mark.parametrize("params", [{"type": ["object", "null"]}, {"properties": {"a": {"type": "string"}}}, {}])
def test_parameters_typed_object_or_untyped_are_kept(params: dict[str, object]) -> None:
    assert normalize_tools([{"name": "tag", "parameters": params}])["tag"].parameters == params
