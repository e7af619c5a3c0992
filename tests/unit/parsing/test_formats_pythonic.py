"""The pythonic finder: call lists read with ast, literals walked, never evaluated."""

from __future__ import annotations

from tooldispatch.parsing.formats import pythonic


def test_list_of_calls() -> None:
    """[f(a=1), g()] at a line start gives one call per element."""
    found = pythonic.find('[get_weather(city="Paris", days=3), get_time()]')
    assert [(c.name, c.arguments, c.format, c.stage) for c in found] == [
        ("get_weather", {"city": "Paris", "days": 3}, "pythonic", "strict"),
        ("get_time", {}, "pythonic", "strict"),
    ]


def test_literal_values_and_json_spellings() -> None:
    """Containers, negatives and JSON names (true/null) are read as values."""
    found = pythonic.find("[f(a=[1, -2.5], b={'k': (1, 2)}, c=true, d=None, e=null)]")
    assert found[0].arguments == {"a": [1, -2.5], "b": {"k": [1, 2]}, "c": True, "d": None, "e": None}


def test_non_literal_argument_is_an_error_not_evaluated() -> None:
    """A call or name as a value is rejected with a message; nothing runs."""
    found = pythonic.find("[f(a=__import__('os').system('x'))]")
    assert [(c.name, c.arguments) for c in found] == [("f", None)]
    assert found[0].decode_error is not None and found[0].decode_error.startswith("argument 'a': not a literal")


def test_positional_arguments_are_an_error() -> None:
    """Positional arguments cannot be mapped without a schema, so they are reported."""
    found = pythonic.find('[f("Paris")]')
    assert found[0].decode_error == "positional arguments are not allowed; pass every argument as name=value"


def test_one_bad_element_keeps_the_others() -> None:
    """A syntax error in one element does not drop the other elements."""
    found = pythonic.find('[a(x=1), b(y=), c(z="ok")]')
    assert [(c.name, c.arguments, c.decode_error) for c in found] == [
        ("a", {"x": 1}, None),
        ("b", None, "not a valid call"),
        ("c", {"z": "ok"}, None),
    ]


def test_unclosed_list_is_truncated() -> None:
    """A list cut off at the end is truncated."""
    found = pythonic.find('[get_weather(city="Par')
    assert [(c.name, c.truncated) for c in found] == [("get_weather", True)]


def test_negatives() -> None:
    """Prose, links and mid-line brackets are not pythonic calls."""
    assert pythonic.find("Call get_weather(city='Paris') to know.") == []
    assert pythonic.find("See [the docs](https://example.com).") == []
    assert pythonic.find("as in [1, 2, 3]") == []


def test_parse_python_calls_rejects_statements() -> None:
    """Assignments and imports are not call lists."""
    assert pythonic.parse_python_calls("x = f()") is None
    assert pythonic.parse_python_calls("import os") is None
    assert pythonic.parse_python_calls("f(a=1)\ng(b=2)") == [
        pythonic.PyCall("f", {"a": 1}),
        pythonic.PyCall("g", {"b": 2}),
    ]
