"""Tool prompt formats for prompt-mode models: how tools are shown, how calls and results are written.

A format is data plus three small renderers: the system-prompt block that lists the tools and states
the exact call syntax, the text of an assistant turn that called tools (for the history), and the text
of a tool result when results go back as user turns.

=================  ==========================================================  =======================
format             a call                                                      a result (user turn)
=================  ==========================================================  =======================
hermes             ``<tool_call>\\n{"name": …, "arguments": {…}}\\n</tool_call>``  ``<tool_response>``
hermes_list        ``<tool_call>[{"name": …, "arguments": {…}}]</tool_call>``  ``<tool_response>``
json               ``{"name": …, "parameters": {…}}`` (Llama 3 style)           ``<tool_response>``
pythonic           ``[get_weather(city="Oslo")]``                              ``<tool_response>``
gemma_tool_code    a ```` ```tool_code ```` fence holding ``get_weather(city="Oslo")``   ```` ```tool_output ````
=================  ==========================================================  =======================
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tooldispatch.errors import ConfigError
from tooldispatch.toolspec import ToolSpec

CallList = Sequence[tuple[str, Mapping[str, Any]]]
"""Calls as ``(name, arguments)`` pairs."""


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _py_literal(value: Any) -> str:
    """A Python literal for a JSON value (``true`` → ``True``), parseable by ``ast.literal_eval``."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (int, float, str)):
        return _dumps(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_dumps(str(k))}: {_py_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_py_literal(v) for v in value) + "]"
    return _dumps(str(value))


def _py_call(name: str, args: Mapping[str, Any]) -> str:
    return f"{name}(" + ", ".join(f"{k}={_py_literal(v)}" for k, v in args.items()) + ")"


def _tool_lines(tools: Sequence[ToolSpec]) -> str:
    return "\n".join(_dumps(t.to_openai()) for t in tools)


def _hermes_system(tools: Sequence[ToolSpec]) -> str:
    return (
        "You may call functions to help with the user's request. The functions are described as JSON "
        "schemas inside <tools></tools> tags:\n"
        f"<tools>\n{_tool_lines(tools)}\n</tools>\n\n"
        "To call a function, write a JSON object with its name and arguments inside <tool_call></tool_call> "
        "tags, one block per call:\n"
        '<tool_call>\n{"name": "function_name", "arguments": {"argument_name": "value"}}\n</tool_call>\n'
        "Use only the functions listed above, and only argument values the user gave or a result returned. "
        "When no call is needed, answer in plain text."
    )


def _hermes_calls(calls: CallList) -> str:
    return "\n".join(f"<tool_call>\n{_dumps({'name': n, 'arguments': dict(a)})}\n</tool_call>" for n, a in calls)


def _hermes_list_system(tools: Sequence[ToolSpec]) -> str:
    listed = _dumps([t.to_openai()["function"] for t in tools])
    return (
        "You may call functions to help with the user's request. The functions are described as JSON "
        f"inside <tools></tools> tags:\n<tools>{listed}</tools>\n\n"
        "To call functions, answer with only a JSON list of calls inside <tool_call></tool_call> tags:\n"
        '<tool_call>[{"name": "function_name", "arguments": {"argument_name": "value"}}]</tool_call>\n'
        "Use only the functions listed above. When no call is needed, answer in plain text."
    )


def _hermes_list_calls(calls: CallList) -> str:
    return "<tool_call>" + _dumps([{"name": n, "arguments": dict(a)} for n, a in calls]) + "</tool_call>"


def _json_system(tools: Sequence[ToolSpec]) -> str:
    return (
        "You have access to the functions below. To call one, respond with only a JSON object of the form "
        '{"name": function name, "parameters": object of argument names and values}, for example\n'
        '{"name": "function_name", "parameters": {"argument_name": "value"}}\n'
        "Do not use variables. When no call is needed, answer in plain text.\n\n"
        f"{_tool_lines(tools)}"
    )


def _json_calls(calls: CallList) -> str:
    return "; ".join(_dumps({"name": n, "parameters": dict(a)}) for n, a in calls)


def _pythonic_system(tools: Sequence[ToolSpec]) -> str:
    return (
        "You have access to the functions below, described as JSON schemas. To call functions, respond with "
        "only a Python list of calls with keyword arguments, for example\n"
        '[function_name(argument_name="value"), other_function()]\n'
        "When no call is needed, answer in plain text.\n\n"
        f"{_tool_lines(tools)}"
    )


def _pythonic_calls(calls: CallList) -> str:
    return "[" + ", ".join(_py_call(n, a) for n, a in calls) + "]"


def _gemma_system(tools: Sequence[ToolSpec]) -> str:
    return (
        "You have access to the functions below, described as JSON schemas. To call a function, write a "
        "Python call with keyword arguments inside a tool_code block, for example\n"
        '```tool_code\nfunction_name(argument_name="value")\n```\n'
        "The result comes back in a tool_output block. When no call is needed, answer in plain text.\n\n"
        f"{_tool_lines(tools)}"
    )


def _gemma_calls(calls: CallList) -> str:
    return "\n".join(f"```tool_code\n{_py_call(n, a)}\n```" for n, a in calls)


def _tool_response(content: str) -> str:
    return f"<tool_response>\n{content}\n</tool_response>"


def _tool_output(content: str) -> str:
    return f"```tool_output\n{content}\n```"


@dataclass(frozen=True, slots=True)
class ToolFormat:
    """One tool prompt format.

    Attributes:
        name: the format name used in manifests.
        system: renders the system-prompt block for a list of tools.
        calls: renders an assistant turn's calls as text.
        result: wraps one tool result for a user turn.
        parser_format: the ``tool_format`` name ``parse_tool_calls`` reads this syntax with.
        arguments_key: the key holding arguments in JSON call objects (``arguments`` or ``parameters``).
    """

    name: str
    system: Callable[[Sequence[ToolSpec]], str]
    calls: Callable[[CallList], str]
    result: Callable[[str], str]
    parser_format: str
    arguments_key: str = "arguments"


FORMATS: Mapping[str, ToolFormat] = {
    "hermes": ToolFormat("hermes", _hermes_system, _hermes_calls, _tool_response, "hermes"),
    "hermes_list": ToolFormat("hermes_list", _hermes_list_system, _hermes_list_calls, _tool_response, "hermes"),
    "json": ToolFormat("json", _json_system, _json_calls, _tool_response, "llama3_json", arguments_key="parameters"),
    "pythonic": ToolFormat("pythonic", _pythonic_system, _pythonic_calls, _tool_response, "pythonic"),
    "gemma_tool_code": ToolFormat("gemma_tool_code", _gemma_system, _gemma_calls, _tool_output, "gemma"),
}


def get_format(name: str) -> ToolFormat:
    """Look up a tool format by name.

    Raises:
        ConfigError: unknown name; the message lists the known ones.
    """
    fmt = FORMATS.get(name)
    if fmt is None:
        raise ConfigError(f"unknown tool format {name!r}; choose one of {', '.join(FORMATS)}")
    return fmt
