"""What a tool format declares, in one place: the :class:`Format` each module of ``parsing/formats/`` defines.

A format module holds its finder and, next to it, one ``Format`` constant naming everything else about the
format: the markers that make auto-detection run the finder, the segments the stream parser holds, whether its
values are text typed by the tool's schema, the other names it is known by, and the prompt formats (wording,
result wrapping, grammar) that ask a model for it. Every registry is built from these constants:
``parsing.formats.FORMATS`` and the names ``tool_format`` accepts, the auto-detection markers of
``parsing._markers``, the stream parser's triggers and closers (``parsing._stream_tables``), the formats whose
values are typed (``parsing._typed_values``), the prompt formats of ``prompting.formats``, the grammar shapes of
``prompting.grammar`` and the family defaults of ``models.add``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from tooldispatch.parsing._raw import RawCall
from tooldispatch.toolspec import ToolSpec

PY_LIST: Final = "[call("
"""Pseudo-marker: a ``[name(`` list start, as in ``[get_weather(city="Paris")]``."""
JSON_START: Final = "{start"
"""Pseudo-marker: the text's first non-blank character is ``{``."""
PSEUDO_MARKERS: Final[frozenset[str]] = frozenset({PY_LIST, JSON_START})
"""Markers that are not literal text; ``parsing._markers.scan_markers`` looks for each in its own way."""

CallList = Sequence[tuple[str, Mapping[str, Any]]]
"""Calls as ``(name, arguments)`` pairs."""


@dataclass(frozen=True, slots=True)
class CallGrammar:
    """How a constrained-decoding grammar (``prompting.grammar``) writes the calls of one prompt format.

    Attributes:
        dialect: ``json`` (JSON call objects) or ``python`` (Python calls with keyword arguments).
        open: the text before the calls.
        close: the text after them.
        many: several calls may stand between ``open`` and ``close``, separated by ``", "`` (a list).
        start: the first character of a call, escaped for a GBNF character class; an answer under
            ``tool_choice="auto"`` never contains it, so writing it starts the call.
        lazy_shape: for a format whose call is one JSON object, its shape in ``prompting.grammar.CALL_SHAPES``
            (the lazy grammar binds it); ``None`` for the others (lists of calls, Python calls).
    """

    dialect: Literal["json", "python"]
    open: str
    close: str
    many: bool
    start: str
    lazy_shape: str | None = None


@dataclass(frozen=True, slots=True)
class PromptFormat:
    """How prompt mode asks a model for calls in one format, and writes them back into the history.

    Attributes:
        name: the name model manifests use (``tool_format``); also accepted by ``parse_tool_calls``.
        system: renders the system-prompt block for a list of tools.
        calls: renders an assistant turn's calls as text.
        result: wraps one tool result for a user turn.
        grammar: how a constrained-decoding grammar writes the calls.
        arguments_key: the key holding arguments in JSON call objects (``arguments`` or ``parameters``).
        families: the GGUF architectures (``general.architecture``) whose models get this format when their
            chat template renders no tools (``tooldispatch models add``).
    """

    name: str
    system: Callable[[Sequence[ToolSpec]], str]
    calls: Callable[[CallList], str]
    result: Callable[[str], str]
    grammar: CallGrammar
    arguments_key: str = "arguments"
    families: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Format:
    """One strict tool-call format, declared by its module.

    Attributes:
        name: the name ``parse_tool_calls(tool_format=...)`` accepts.
        find: the finder: ``find(text) -> list[RawCall]``.
        markers: markers of which one must appear in the text for ``auto`` to run the finder: literal text
            starting with ``<``, ``[`` or a backtick (found in one pass by ``parsing._markers``), or one of
            :data:`PSEUDO_MARKERS`.
        auto_find: the finder ``auto`` runs when it differs from ``find`` (a tag shared with another format is
            read once, each block by the format owning its body); ``None``: ``find``.
        auto_markers: the markers for ``auto_find``; ``None``: ``markers``.
        stream_openers: ``(kind, pattern)`` pairs: what opens a call segment the stream parser holds. Each
            pattern is a regex in verbose syntax (a literal space goes in a class) matching a bounded number of
            characters; openers of one kind share one group of the trigger search. Formats without their own
            opener are held by the generic shapes (a ``<tag>``, a fence, a list, a brace).
        stream_closers: ``(kind, pattern)`` pairs: the regex (plain syntax) that ends a segment of that kind.
            Every kind a format opens needs one, except the kinds the stream parser handles itself:
            ``open_ended`` (held to the end of the output) and harmony's message headers.
        text_values: the format writes every value as text, typed by the tool's schema after the finder
            (``parsing._typed_values``).
        other_names: other names ``tool_format`` accepts for it (vLLM's ``--tool-call-parser`` names); a name
            several formats list selects all of them.
        prompts: the prompt formats that ask a model for calls in this format (none: prompt mode cannot ask
            for it).
    """

    name: str
    find: Callable[[str], list[RawCall]]
    markers: tuple[str, ...]
    auto_find: Callable[[str], list[RawCall]] | None = None
    auto_markers: tuple[str, ...] | None = None
    stream_openers: tuple[tuple[str, str], ...] = ()
    stream_closers: tuple[tuple[str, str], ...] = ()
    text_values: bool = False
    other_names: tuple[str, ...] = ()
    prompts: tuple[PromptFormat, ...] = ()
