"""The internal value passed from the finders (strict formats, fallback) to the repair and bucket step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal


@dataclass(init=False, slots=True)
class RawCall:
    """A call-like span before repair and validation.

    Attributes:
        span: start and end offsets in the text searched (``(-1, -1)`` for native calls).
        raw: the span's text.
        format: the format that matched (``hermes``, ``mistral``, ``bare_json``, ...).
        stage: where it was found.
        name: the tool name as written, when one could be read.
        arguments: the decoded arguments value (normally a dict), or ``None`` when nothing decoded.
        arguments_text: the arguments text as written, when it had to be decoded.
        decode_error: why the arguments could not be decoded, when they could not.
        truncated: the span ends because the output was cut off.
        lenient: the lenient-JSON fixes that decoding needed (``single_quotes``, ``trailing_comma``, ...).
        flags: e.g. ``in_reasoning``.
        unearned: why a call-like span in prose is not taken as a call (see ``parsing.earned``), else ``None``.
    """

    span: tuple[int, int]
    raw: str
    format: str
    stage: Literal["native", "strict", "fallback"]
    name: str | None
    arguments: Any = None
    arguments_text: str | None = None
    decode_error: str | None = None
    truncated: bool = False
    lenient: tuple[str, ...] = ()
    flags: frozenset[str] = frozenset()
    unearned: str | None = None

    def __init__(
        self,
        span: tuple[int, int],
        raw: str,
        format: str,
        stage: Literal["native", "strict", "fallback"],
        name: str | None,
        arguments: Any = None,
        arguments_text: str | None = None,
        decode_error: str | None = None,
        truncated: bool = False,
        lenient: tuple[str, ...] = (),
        flags: frozenset[str] = frozenset(),
        unearned: str | None = None,
    ) -> None:
        self.span = span
        self.raw = raw
        self.format = format
        self.stage = stage
        self.name = name
        self.arguments = arguments
        self.arguments_text = arguments_text
        self.decode_error = decode_error
        self.truncated = truncated
        self.lenient = lenient
        self.flags = flags
        self.unearned = unearned
