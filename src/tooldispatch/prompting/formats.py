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
from tooldispatch.parsing.formats._format import CallGrammar, CallList, PromptFormat
from tooldispatch.toolspec import ToolSpec


@dataclass(frozen=True, slots=True)
class ToolFormat:
    """One tool prompt format, with the strict format that parses what it asks for.

    Attributes:
        prompt: the declaration (``parsing.formats._format.PromptFormat``).
        parser_format: the ``tool_format`` name ``parse_tool_calls`` reads this syntax with.
    """

    prompt: PromptFormat
    parser_format: str

    @property
    def name(self) -> str:
        """The format name used in manifests."""
        return self.prompt.name

    @property
    def system(self) -> Callable[[Sequence[ToolSpec]], str]:
        """Renders the system-prompt block for a list of tools."""
        return self.prompt.system

    @property
    def calls(self) -> Callable[[CallList], str]:
        """Renders an assistant turn's calls as text."""
        return self.prompt.calls

    @property
    def result(self) -> Callable[[str], str]:
        """Wraps one tool result for a user turn."""
        return self.prompt.result

    @property
    def arguments_key(self) -> str:
        """The key holding arguments in JSON call objects (``arguments`` or ``parameters``)."""
        return self.prompt.arguments_key

    @property
    def grammar(self) -> CallGrammar:
        """How a constrained-decoding grammar writes the calls."""
        return self.prompt.grammar


FORMATS: Mapping[str, ToolFormat] = {
    name: ToolFormat(prompt, fmt.name) for name, (prompt, fmt) in PROMPT_FORMATS.items()
}
"""Every prompt format by name, as the format modules declare them."""


def get_format(name: str) -> ToolFormat:
    """Look up a tool format by name.

    Raises:
        ConfigError: unknown name; the message lists the known ones.
    """
    fmt = FORMATS.get(name)
    if fmt is None:
        raise ConfigError(f"unknown tool format {name!r}; choose one of {', '.join(FORMATS)}")
    return fmt
