"""Tool prompt formats for prompt-mode models: how tools are shown, how calls and results are written.

Each is declared by the format module whose finder reads what it asks for (``Format.prompts`` in
``parsing/formats/``): the system-prompt block that lists the tools and states the exact call syntax, the text
of an assistant turn that called tools (for the history), the text of a tool result when results go back as
user turns, and how a grammar writes the calls. :data:`FORMATS` collects them.

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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from tooldispatch.errors import ConfigError
from tooldispatch.parsing.formats import PROMPT_FORMATS
from tooldispatch.parsing.formats._format import CallGrammar, CallList
from tooldispatch.toolspec import ToolSpec


@dataclass(frozen=True, slots=True)
class ToolFormat:
    """One tool prompt format, as its format module declares it, with the format that parses its calls.

    Attributes:
        name: the format name used in manifests.
        system: renders the system-prompt block for a list of tools.
        calls: renders an assistant turn's calls as text.
        result: wraps one tool result for a user turn.
        parser_format: the ``tool_format`` name ``parse_tool_calls`` reads this syntax with.
        arguments_key: the key holding arguments in JSON call objects (``arguments`` or ``parameters``).
        grammar: how a constrained-decoding grammar writes the calls.
        families: the GGUF architectures whose template-less models get this format.
    """

    name: str
    system: Callable[[Sequence[ToolSpec]], str]
    calls: Callable[[CallList], str]
    result: Callable[[str], str]
    parser_format: str
    arguments_key: str
    grammar: CallGrammar
    families: tuple[str, ...]


FORMATS: Mapping[str, ToolFormat] = {
    name: ToolFormat(p.name, p.system, p.calls, p.result, f.name, p.arguments_key, p.grammar, p.families)
    for name, (p, f) in PROMPT_FORMATS.items()
}
"""Every prompt format by name, as the format modules declare them (``Format.prompts``)."""


def get_format(name: str) -> ToolFormat:
    """Look up a tool format by name.

    Raises:
        ConfigError: unknown name; the message lists the known ones.
    """
    fmt = FORMATS.get(name)
    if fmt is None:
        raise ConfigError(f"unknown tool format {name!r}; choose one of {', '.join(FORMATS)}")
    return fmt
