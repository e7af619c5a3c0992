"""Incremental parsing of a streamed model output.

:class:`StreamParser` is fed text deltas and answers each with events (``parsing.stream_events``): reasoning
text, the moment reasoning ended, content that is safe to show, and each tool call as soon as its closing marker
arrives. Reasoning the backend split off is handed over apart (:meth:`StreamParser.feed_reasoning`), as
``reasoning=`` is to ``parse_tool_calls``; reasoning written in the text (``<think>…</think>``) is split here.

How it stays linear: the parser keeps a scan position and looks only at new text. Plain content passes
through; text that may start a call (``<``, ``<tool``, ``[TOOL_``, ``{``, a declared tool name before ``(``,
``<|python``, a fence) is held back until it resolves. A held call segment is watched for its end (its closing
tag or token, or the bracket that balances its first one) with a small state machine over the new text only,
and then that segment alone goes through :func:`~tooldispatch.parsing.core.parse_tool_calls`. The tables
and the trie are in :mod:`tooldispatch.parsing._stream_tables`. :attr:`StreamParser.outcome`, set by
:meth:`StreamParser.close`, is ``parse_tool_calls(whole_text, reasoning=handed_over, ...)`` with the same options.

Known limits of the early reports (the final outcome is always exact): calls found only inside the
reasoning, bare JSON and python calls (whose standing in prose only the whole text shows), calls after
``[TOOL_CALLS]`` or ``<|python_tag|>``, calls whose closing marker never came, and a side-effecting tool's
call (what follows it decides: ``parsing.earned``) with every later call are reported at ``close``.
A ``</think>`` with no opener is only recognised when ``reasoning_open=True``. A call segment is parsed alone,
so a reported call's ``format``, ``stage`` or ``bucket`` may differ from the final outcome's, and markers mixed
in odd ways (a tag opened inside a fence, harmony channels inside ``<think>``, a wrapper tag with more than 16
spaces or tabs around its name) can make the early reports differ from the final calls.
"""

from __future__ import annotations

import re
import time
from collections.abc import Container
from typing import Final

import regex

from tooldispatch.parsing._stream_tables import (
    _AFTER_LT,
    _AFTER_WORD,
    _ANYTHING,
    _BALANCED,
    _BALANCED_TABLE,
    _BRACKET,
    _BRACKET_CHARS,
    _CLOSED,
    _CLOSER_LAST,
    _CLOSER_PATTERNS,
    _CLOSER_STEPS,
    _CLOSER_TABLE,
    _CLOSERS,
    _CLOSING,
    _CONTENT,
    _EVERY_ASCII,
    _GATHER,
    _HOLD,
    _LIST_WORD,
    _LITERAL_CLOSERS,
    _LITERAL_OPENERS,
    _NAME_START,
    _NEWLINE,
    _NO_ASCII,
    _NO_STEPS,
    _NOTHING,
    _PLAIN_NAME,
    _REASONING,
    _REASONING_CLOSERS,
    _REASONING_STOPS,
    _REASONING_STOPS_NL,
    _REASONING_TABLE,
    _SEGMENT,
    _STATIC_STARTS,
    _STATIC_TRIGGERS,
    _STOP,
    _TAG_CLOSE,
    _TAG_WORD,
    _TAIL,
    _TRAILING_WORD,
    _UNDELIMITED,
    _WORD,
    _WORD_ASCII,
    _WORD_RUN,
    _WORD_TABLE,
    _ascii_table,
    _find_literal,
    _mark_names,
    _prefix_steps,
    _Step,
    _wordish,
)
from tooldispatch.parsing.core import parse_tool_calls
from tooldispatch.parsing.earned import refused_before
from tooldispatch.parsing.fallback import is_wrapper_name
from tooldispatch.parsing.formats._common import TOOL_CALL_CLOSE
from tooldispatch.parsing.stream_events import CallReady, ContentText, ReasoningEnded, ReasoningText, StreamEvent
from tooldispatch.toolspec import ToolsInput, normalize_tools
from tooldispatch.types import ParseOutcome, RepairSpec, ToolCall

__all__ = ["CallReady", "ContentText", "ReasoningEnded", "ReasoningText", "StreamEvent", "StreamParser"]


_NO_EVENTS: Final[tuple[StreamEvent, ...]] = ()


class StreamParser:
    """Parse a model output while it streams.

    Args:
        tools: the declared tools, in any form :func:`~tooldispatch.toolspec.normalize_tools` accepts.
        tool_format: as for ``parse_tool_calls`` (``"auto"`` or one format name).
        reasoning_open: the prompt already opened a ``<think>`` block, so the output starts in reasoning.
        repair: as for ``parse_tool_calls``.

    Example::

        parser = StreamParser(tools)
        for delta in deltas:  # reasoning the backend split off goes to ``parser.feed_reasoning``
            for event in parser.feed(delta):
                ...
        events = parser.close(finish_reason)
        outcome = parser.outcome
    """

    def __init__(
        self,
        tools: ToolsInput,
        *,
        tool_format: str = "auto",
        reasoning_open: bool = False,
        repair: RepairSpec | None = None,
    ) -> None:
        self._specs = normalize_tools(tools)
        self._tool_format = tool_format
        self._reasoning_open = reasoning_open
        self._repair = repair
        names = "|".join(re.escape(n) for n in sorted(self._specs, key=len, reverse=True))
        name_trigger = rf"| (?P<name>(?<![\w.])(?:functions\.)?(?:{names})[ \t]{{0,4}}(?::[ \t]{{0,4}})?[({{])"
        self._trigger = regex.compile(_STATIC_TRIGGERS + (name_trigger if names else ""), regex.VERBOSE)
        # Cheap pre-check: a trigger can only start at one of these characters (names only at a word start).
        spelled = [*self._specs, *(f"functions.{n}" for n in self._specs)]
        self._name_starts = frozenset(n[0] for n in spelled)
        self._name_prefixes = frozenset(n[:k] for n in spelled for k in range(1, len(n) + 1))
        # For a held text that is a strict prefix of ``<tool_call>``, ``<think>`` or a declared name (one the trigger
        # search holds back letter by letter), the characters that keep it one.
        self._opener_steps = _prefix_steps([*_LITERAL_OPENERS, *(n for n in spelled if _PLAIN_NAME.fullmatch(n))])
        # A word that begins a declared name is gathered while it still begins one (``_word_at``: its start in
        # ``_hold``, -1 for none; ``_word``: its step), when every name can be held letter by letter.
        plain = bool(spelled) and all(_PLAIN_NAME.fullmatch(n) for n in spelled)
        self._words: dict[str, _Step] | None = self._opener_steps[""] if plain else None
        if plain:
            _mark_names(self._opener_steps[""], spelled)
        self._word_at = -1
        self._word = _Step("", False)
        self._maybe_trigger = re.compile(r"[<\[{`]" + (rf"|(?<![\w.])(?:functions\.)?(?:{names})" if names else ""))
        self._content_stops = _STATIC_STARTS | self._name_starts
        self._content_stops_nl = self._content_stops | _NEWLINE
        self._last = ""  # the last character given out as content (a name must not continue a word)
        self._chunks: list[str] = []
        self._given: list[str] = []  # the reasoning handed over apart (``feed_reasoning``)
        self._pending = ""
        self._mode = _REASONING if reasoning_open else _CONTENT
        self._reasoning_closer = _CLOSER_PATTERNS[_REASONING_CLOSERS["<think>"]]
        self._closer_literal: str | None = "</think>"
        self._events: list[StreamEvent] = []
        self._emitted: list[ToolCall] = []
        self.withholding = False  # a side-effecting call came: it and every later call are reported at ``close``
        self._outcome: ParseOutcome | None = None
        # The call segment being held.
        self._seg: list[str] = []
        self._seg_kind = ""
        self._seg_tail = ""
        self._depth = 0
        self._quote = ""
        self._escaped_at = -1
        self._seg_len = 0
        # One-character deltas of plain text are gathered in ``_hold`` (its first ``_held`` slots) and given out
        # together (added to ``_chunks`` then); ``_quiet`` is the set of characters that end the gathering in the
        # current mode (None: no gathering).
        self._hold: list[str] = [""] * _HOLD
        self._held = 0
        self._quiet: frozenset[str] | None = None
        # What :meth:`feed` checks first: ``_stops`` is ``_quiet`` plus the newline (every character when
        # nothing is gathered), and ``_stop_table`` the same for ASCII, by code point (see :func:`_ascii_table`);
        # ``_next`` maps each character that keeps a held literal prefix one to the longer prefix's step.
        self._stops: Container[str] = _ANYTHING
        self._stop_table = _EVERY_ASCII
        self._content_table = _ascii_table(self._content_stops_nl, self._name_starts)
        self._next: dict[str, _Step] = _NO_STEPS
        self._set_quiet(_REASONING_STOPS if reasoning_open else self._content_stops)

    @property
    def outcome(self) -> ParseOutcome | None:
        """The final outcome, equal to ``parse_tool_calls`` on the whole text; ``None`` until :meth:`close`."""
        return self._outcome

    def feed(self, delta: str) -> tuple[StreamEvent, ...]:
        """Take the next piece of text and return the events it completes (a tuple, most often empty).

        Raises:
            RuntimeError: the parser was already closed.
        """
        if len(delta) == 1:
            code = ord(delta)
            stop = self._stop_table[code] if code < 128 else int(delta in self._stops)
            if stop == _NAME_START:  # a declared name's first letter starts nothing inside a word
                held = self._held
                if _wordish(self._hold[held - 1] if held else self._last):
                    stop = _GATHER
                else:
                    first = self._words.get(delta) if self._words is not None else None
                    if first is None or held >= _HOLD - 1:
                        stop = _STOP
                    else:  # a word that may begin a declared name: gathered while it does
                        self._hold[held] = delta
                        self._held = held + 1
                        self._word_at = held
                        self._word = first
                        self._stop_table = _WORD_TABLE
                        self._stops = _ANYTHING
                        self._next = _NO_STEPS
                        return _NO_EVENTS
            elif stop == _WORD:
                return self._word_char(delta)
            elif stop == _BRACKET:  # a bracket, a quote or a backslash of a balanced segment: track it, gather it
                if self._track(delta, self._seg_len + self._held):
                    return self._end_balanced(delta)
                stop = _GATHER
            if stop != _STOP:
                # One character that changes nothing: gather it instead of one event (or one scan) per character
                # (a newline gives out what was gathered).
                held = self._held
                self._hold[held] = delta
                held += 1
                self._held = held
                if held < _HOLD and not stop:
                    return _NO_EVENTS
                return self._flush()
            step = self._next.get(delta)
            if step is not None:
                # A strict prefix of ``<tool_call>``, ``<think>``, a declared name or the reasoning's closer: it is
                # held, and nothing resolves yet (or the whole marker, acted on at once).
                released = self._flush() if self._held else _NO_EVENTS
                self._chunks.append(delta)
                if step.marker:
                    self._pending = ""
                    return self._marker(step.text, released)
                self._pending = step.text
                if self._quiet is None:
                    self._next = step.next
                else:
                    self._set_quiet(None)
                return released
        return self._feed(delta)

    def feed_reasoning(self, delta: str) -> tuple[StreamEvent, ...]:
        """Take reasoning the backend split off (the text of a ``ReasoningDelta``); it is never read as content.

        It reaches :attr:`outcome` as ``parse_tool_calls(..., reasoning=...)``: a call written in it is recovered,
        flagged ``in_reasoning``, at :meth:`close` when no call stands outside it.

        Returns:
            The delta as one ``ReasoningText`` (nothing for an empty delta).

        Raises:
            RuntimeError: the parser was already closed.
        """
        if self._mode == _CLOSED:
            raise RuntimeError("StreamParser.feed_reasoning() after close(); start a new StreamParser for a new output")
        if not delta:
            return _NO_EVENTS
        self._given.append(delta)
        return (ReasoningText(delta),)

    def _word_char(self, char: str) -> tuple[StreamEvent, ...]:
        """Take one ASCII character after a word that may begin a declared name (see ``_word_at``).

        While the word still begins a name it is gathered. When it ends, the two common answers of the held-prefix
        path (:meth:`_content` on the word and this character) are read off the word's step: a word that only
        began like a name (a word character that makes no name), and a word followed by a character no trigger
        continues with, no name being a prefix of the word (:meth:`_may_start_call` is false). Both are prose,
        and the word and this character stay gathered. Otherwise the word is held as that path holds it
        (:meth:`_hold_word`) and the character goes there.
        """
        word = self._word
        step = word.next.get(char)
        held = self._held
        if step is not None:
            if held < _HOLD - 1:
                self._hold[held] = char
                self._held = held + 1
                self._word = step
                return _NO_EVENTS
        elif not word.dash and (
            (char not in word.ends) if char in _WORD_ASCII else (not word.named and char not in _AFTER_WORD)
        ):
            self._word_at = -1
            self._set_quiet(self._content_stops)
            self._hold[held] = char  # taken with the word, as that path takes it
            held += 1
            self._held = held
            if held < _HOLD and char != "\n":
                return _NO_EVENTS
            return self._flush()
        released = self._hold_word()
        events = self.feed(char)
        return (*released, *events) if released else events

    def _hold_word(self) -> tuple[StreamEvent, ...]:
        """Hold the gathered word that may begin a declared name as a held prefix; give out the text before it.

        The parser is then as if the word had come through the held-prefix path of :meth:`feed`.
        """
        at = self._word_at
        held = self._held
        word = "".join(self._hold[at:held])
        self._word_at = -1
        self._held = at
        released = self._flush() if at else _NO_EVENTS
        self._chunks.append(word)
        self._pending = word
        self._set_quiet(None)
        return released

    def _feed(self, delta: str) -> tuple[StreamEvent, ...]:
        """:meth:`feed` for every delta its two quick checks do not settle."""
        if self._word_at >= 0:
            released = self._hold_word()
            events = self._feed(delta)
            return (*released, *events) if released else events
        quiet = self._quiet
        if (
            quiet is not None
            and len(delta) == 1
            and (
                delta not in quiet
                or (
                    quiet is self._content_stops
                    and delta not in _STATIC_STARTS
                    and _wordish(self._hold[self._held - 1] if self._held else self._last)
                )
            )
        ):
            # One character that changes nothing: gather it instead of one event (or one scan) per character.
            held = self._held
            self._hold[held] = delta
            held += 1
            self._held = held
            if held < _HOLD and delta != "\n":
                return _NO_EVENTS
            return self._flush()
        if self._mode == _CLOSED:
            raise RuntimeError("StreamParser.feed() after close(); start a new StreamParser for a new output")
        if not delta:
            return _NO_EVENTS
        released = self._flush() if self._held else _NO_EVENTS
        self._chunks.append(delta)
        if not self._pending:  # fast paths: plain content, plain reasoning
            if self._mode == _CONTENT and (
                (
                    len(delta) == 1
                    and delta not in _STATIC_STARTS
                    and (delta not in self._name_starts or _wordish(self._last))
                )
                or (len(delta) > 1 and not self._may_start_call(delta))
            ):
                self._last = delta[-1]
                return (*released, ContentText(delta))
            if self._mode == _REASONING and "<" not in delta and "[" not in delta:
                return (*released, ReasoningText(delta))
        self._events = list(released)
        text = self._pending + delta
        self._pending = ""
        while text:
            if self._mode == _CONTENT:
                text = self._content(text)
            elif self._mode == _REASONING:
                text = self._reasoning(text)
            else:
                text = self._segment(text)
        quiet = self._gather_stops()
        if quiet is None or quiet is not self._quiet:  # a held prefix may have changed what keeps it one
            self._set_quiet(quiet)
        return tuple(self._events)

    def _marker(self, marker: str, released: tuple[StreamEvent, ...]) -> tuple[StreamEvent, ...]:
        """Act on a literal marker completed in the quick path, as :meth:`_content` and :meth:`_reasoning` do."""
        if self._mode == _REASONING:
            self._mode = _CONTENT
            events = (*released, ReasoningEnded(time.monotonic()))
        else:
            self._open_marker(marker)
            events = released
        self._set_quiet(self._gather_stops())
        return events

    def _open_marker(self, marker: str) -> None:
        """Enter the reasoning at ``<think>``, or hold the segment a ``<tool_call>`` opens."""
        if marker == "<think>":
            self._enter_reasoning(_REASONING_CLOSERS[marker])
        else:
            self._open_segment("tag", marker, "")

    def _set_quiet(self, quiet: frozenset[str] | None) -> None:
        """Set the characters that end the gathering, and what :meth:`feed` checks first."""
        self._quiet = quiet
        if quiet is None:
            self._stops = _ANYTHING
            self._stop_table = _EVERY_ASCII
        elif quiet is self._content_stops:
            self._stops = self._content_stops_nl
            self._stop_table = self._content_table
        elif quiet is _REASONING_STOPS:
            self._stops = _REASONING_STOPS_NL
            self._stop_table = _REASONING_TABLE
        else:  # a held segment: a newline releases nothing there
            self._stops = quiet
            if quiet is _BRACKET_CHARS:
                self._stop_table = _BALANCED_TABLE
            elif quiet is _CLOSER_LAST:
                self._stop_table = _CLOSER_TABLE
            else:  # ``_NOTHING``: an open-ended segment gathers everything
                self._stop_table = _NO_ASCII
        self._next = self._step_table()

    def _step_table(self) -> dict[str, _Step]:
        """What keeps the held text a strict prefix of a literal marker (see ``_next``; empty when nothing does)."""
        pending = self._pending
        if self._mode == _CONTENT:
            return self._opener_steps.get(pending, _NO_STEPS)
        literal = self._closer_literal
        if self._mode != _REASONING or literal is None:
            return _NO_STEPS
        return _CLOSER_STEPS[literal].get(pending, _NO_STEPS)

    def _gather_stops(self) -> frozenset[str] | None:
        """The characters that cannot be gathered in the current state (``None``: gather nothing)."""
        if self._pending:
            return None
        if self._mode == _CONTENT:
            return self._content_stops
        if self._mode == _REASONING:
            return _REASONING_STOPS
        if self._mode != _SEGMENT:
            return None
        if self._seg_kind in _BALANCED:
            return _BRACKET_CHARS
        return _NOTHING if self._seg_kind == "open_ended" else _CLOSER_LAST

    def _flush(self) -> tuple[StreamEvent, ...]:
        """Give out the gathered one-character deltas: one event, or added to the held segment."""
        held = self._held
        text = "".join(self._hold) if held == _HOLD else "".join(self._hold[:held])
        self._held = 0
        self._chunks.append(text)
        if self._mode == _SEGMENT:
            self._seg.append(text)
            if self._seg_kind in _BALANCED:
                self._seg_len += len(text)  # its brackets and strings were tracked as it was gathered
            elif self._seg_kind != "open_ended":
                self._seg_tail = (self._seg_tail + text)[-_TAIL:]
            return _NO_EVENTS
        if self._mode == _REASONING:
            return (ReasoningText(text),)
        self._last = text[-1]
        return (ContentText(text),)

    def _track(self, char: str, pos: int) -> bool:
        """Track one bracket, quote or backslash at ``pos`` in a balanced segment; ``True`` when it balances it.

        The string and bracket state of the segment: a closing bracket outside a string ends the segment when it
        closes the first one; a backslash in a string escapes the character after it.
        """
        if self._quote:
            if char == "\\":
                if pos != self._escaped_at:
                    self._escaped_at = pos + 1
            elif char == self._quote and pos != self._escaped_at:
                self._quote = ""
        elif char == '"' or char == "'":
            self._quote = char
        elif char in _CLOSING:
            self._depth -= 1
            return self._depth <= 0
        elif char != "\\":
            self._depth += 1
        return False

    def _end_balanced(self, char: str) -> tuple[StreamEvent, ...]:
        """Finish a balanced segment at ``char``, the one-character delta that balances it (tracked by :meth:`feed`)."""
        held = self._held
        self._hold[held] = char
        self._held = held + 1
        self._flush()
        self._events = []
        self._finish_segment("".join(self._seg), None)
        self._set_quiet(self._gather_stops())
        return tuple(self._events)

    def close(self, finish_reason: str | None = None) -> tuple[StreamEvent, ...]:
        """End the stream: report what was held back, and compute :attr:`outcome`.

        Args:
            finish_reason: the server's finish reason (``"length"`` marks a call cut off at the end as truncated).

        Returns:
            The last events: held content, calls reported only now (see the module notes).
        """
        if self._mode == _CLOSED:
            return _NO_EVENTS
        self._events = list(self._hold_word()) if self._word_at >= 0 else []
        if self._held:
            self._events += self._flush()
        self._set_quiet(None)
        if self._mode == _SEGMENT:
            # Only its content is given out here; its calls come from the whole-text outcome below.
            self._finish_segment("".join(self._seg), finish_reason, report_calls=False)
        elif self._pending:
            if self._mode == _REASONING:
                self._events.append(ReasoningText(self._pending))
            else:
                self._events.append(ContentText(self._pending))
        self._pending = ""
        self._mode = _CLOSED
        self._next = _NO_STEPS
        whole = "".join(self._chunks)
        self._outcome = parse_tool_calls(
            whole,
            self._specs,
            reasoning="".join(self._given),
            tool_format=self._tool_format,
            reasoning_open=self._reasoning_open,
            finish_reason=finish_reason,
            repair=self._repair,
        )
        final = self._outcome.calls
        emitted = self._emitted
        if len(final) > len(emitted):  # calls the early reports lack, when those match the final ones so far
            reported = [(c.name, c.arguments) for c in emitted]
            if [(c.name, c.arguments) for c in final[: len(emitted)]] == reported:
                for call in final[len(emitted) :]:
                    self._emit_call(call)
        return tuple(self._events)

    # -- modes ------------------------------------------------------------------------------------------

    def _content(self, text: str) -> str:
        if text[0] == "<":
            for literal in _LITERAL_OPENERS:
                if literal.startswith(text):
                    if len(text) < len(literal):
                        self._pending = text
                    else:
                        self._open_marker(literal)
                    return ""
        # What the trigger search finds for the most common starts, without running it.
        if len(text) == 2 and text[0] == "<" and text[1] not in _AFTER_LT and text[1] not in self._content_stops:
            self._say(text)  # "</", "<=", "<3" start nothing, and neither does their second character alone
            return ""
        if text == "{":
            return self._open_balanced("brace", text, "")
        if text == "[{":
            return self._open_balanced("list", text, "")
        if (
            text == "["
            or (len(text) == 1 and text in self._name_starts and not _wordish(self._last))
            or (text[0] == "<" and _TAG_WORD.fullmatch(text) is not None)
            or (text[0] == "[" and _LIST_WORD.fullmatch(text) is not None)
        ):
            self._pending = text  # a partial match: a tag, a list, [TOOL_CALLS], [THINK] or a declared name may follow
            return ""
        if text[0] in self._name_starts and text not in self._name_prefixes and _WORD_RUN.fullmatch(text) is not None:
            self._say(text)  # a word that only began like a declared name ("for" against "functions.")
            return ""
        if not self._may_start_call(text):
            self._say(text)
            return ""
        context = self._last + text
        m = self._trigger.search(context, len(self._last), partial=True)
        if m is None:
            self._say(text)
            return ""
        start = m.start() - len(self._last)
        if start:
            self._say(text[:start])
        if m.partial:
            self._pending = text[start:]
            return ""
        kind = m.lastgroup or ""
        rest = text[start + len(m.group()) :]
        matched = m.group()
        if kind == "think":
            self._enter_reasoning(_REASONING_CLOSERS[matched])
            return rest
        if kind == "harmony":
            if "to=" in matched:
                return self._open_segment("harmony_call", matched, rest)
            if "analysis" in matched:
                self._enter_reasoning(_REASONING_CLOSERS["harmony"])
            return rest  # the header of a content message is neither content nor reasoning
        if kind == "harmony_junk":
            return rest
        if kind == "tag" and not is_wrapper_name(m.group("tag").strip("<>| \t")):
            self._say(matched)
            return rest
        if kind in ("brace", "list", "name"):
            return self._open_balanced(kind, matched, rest)
        return self._open_segment(kind, matched, rest)

    def _may_start_call(self, delta: str) -> bool:
        """Cheap test: could a call marker or a declared name start in ``delta`` (or continue past it)?"""
        context = self._last + delta
        if self._maybe_trigger.search(context, len(self._last)) is not None:
            return True
        tail = _TRAILING_WORD.search(context, len(self._last))
        return tail is not None and tail.group() in self._name_prefixes

    def _say(self, text: str) -> None:
        self._events.append(ContentText(text))
        self._last = text[-1]

    def _reasoning(self, text: str) -> str:
        if "<" not in text and "[" not in text:  # every closer starts with one of these
            self._events.append(ReasoningText(text))
            return ""
        literal = self._closer_literal
        if literal is not None and literal.startswith(text):
            if len(text) < len(literal):
                self._pending = text
            else:
                self._events.append(ReasoningEnded(time.monotonic()))
                self._mode = _CONTENT
            return ""
        if literal is not None:
            found = _find_literal(literal, text)
            if found is None:
                self._events.append(ReasoningText(text))
                return ""
            start, end, partial = found
        else:
            m = self._reasoning_closer.search(text, partial=True)
            if m is None:
                self._events.append(ReasoningText(text))
                return ""
            start, end, partial = m.start(), m.end(), m.partial
            if not partial and m.group() == "<|start|>":
                end = start  # the next harmony message's header: content reads it
        if start:
            self._events.append(ReasoningText(text[:start]))
        if partial:
            self._pending = text[start:]
            return ""
        self._events.append(ReasoningEnded(time.monotonic()))
        self._mode = _CONTENT
        return text[end:]

    def _enter_reasoning(self, closer: str) -> None:
        self._mode = _REASONING
        self._closer_literal = _LITERAL_CLOSERS.get(closer)
        self._reasoning_closer = _CLOSER_PATTERNS[closer]

    # -- call segments ------------------------------------------------------------------------------

    def _open_segment(self, kind: str, opener: str, rest: str) -> str:
        """Hold a segment that ends at a closing marker (open-ended ones run to the end of the output)."""
        self._mode = _SEGMENT
        self._seg_kind = kind
        self._seg = [opener]
        self._seg_tail = ""
        return rest

    def _open_balanced(self, kind: str, opener: str, rest: str) -> str:
        """Hold a segment that ends when its first bracket is balanced."""
        self._open_segment(kind, "", "")
        self._depth = 0
        self._quote = ""
        self._escaped_at = -1
        self._seg_len = 0
        remainder = self._scan_balanced(opener)
        if remainder is not None:  # cannot happen: the opener itself never balances
            return remainder + rest
        return rest

    def _segment(self, text: str) -> str:
        kind = self._seg_kind
        if kind in ("brace", "list", "name"):
            remainder = self._scan_balanced(text)
            return remainder if remainder is not None else ""
        if kind == "open_ended":  # no closing marker: held to the end of the output
            self._seg.append(text)
            return ""
        window = self._seg_tail + text
        if text == ">" and kind == "tag" and window.endswith(TOOL_CALL_CLOSE):
            # Every closing marker ends at a ">", and each ">" is looked at as it arrives: this is the first one.
            end: int | None = len(window)
        else:
            end = self._closer_end(kind, window)
        if end is None:
            self._seg.append(text)
            self._seg_tail = window[-_TAIL:]
            return ""
        cut = end - len(self._seg_tail)
        self._seg.append(text[:cut])
        self._finish_segment("".join(self._seg), None)
        return text[cut:]

    def _closer_end(self, kind: str, window: str) -> int | None:
        """Where the segment's closing marker ends in ``window``, if it is there."""
        if kind == "tag":
            for m in _TAG_CLOSE.finditer(window):
                if is_wrapper_name(m.group(1)):
                    return m.end()
            return None
        found = _CLOSERS[kind].search(window)
        return found.end() if found else None

    def _scan_balanced(self, text: str) -> str | None:
        """Track brackets and strings over new text; at balance, finish the segment and return the rest."""
        base = self._seg_len
        for i in range(len(text)):
            c = text[i]
            if c in _BRACKET_CHARS and self._track(c, base + i):
                cut = i + 1
                self._seg.append(text[:cut])
                self._finish_segment("".join(self._seg), None)
                return text[cut:]
        self._seg.append(text)
        self._seg_len = base + len(text)
        return None

    def _finish_segment(self, segment: str, finish_reason: str | None, *, report_calls: bool = True) -> None:
        """Parse one held segment on its own and report its calls (or give it back as content)."""
        self._mode = _CONTENT
        self._seg = []
        outcome = parse_tool_calls(
            segment, self._specs, finish_reason=finish_reason, tool_format=self._tool_format, repair=self._repair
        )
        if not outcome.candidates:
            if segment:
                self._events.append(ContentText(segment))
            return
        calls = outcome.calls
        side_effecting = any(self._specs[c.name].repair != "bounded" for c in calls if c.name in self._specs)
        delimited = self._seg_kind not in _UNDELIMITED
        window = len(segment) + 2 * _TAIL + 256 if delimited else 0  # how far back the text is read (0: all of it)
        if (
            calls
            and (delimited or side_effecting)
            and refused_before(self._chunks, segment, window, side_effecting, self._reasoning_open)
        ):
            self._events.append(ContentText(segment))  # the whole-text parse will not take it either
            return
        if outcome.content:
            self._events.append(ContentText(outcome.content))
        if report_calls and delimited and not self.withholding:
            self.withholding = side_effecting
            for call in () if side_effecting else calls:
                self._emit_call(call)

    def _emit_call(self, call: ToolCall) -> None:
        if call.id is None or call.id.startswith("call_"):
            ident = f"call_{len(self._emitted)}"
            if call.id != ident:  # built directly: ``dataclasses.replace`` costs several times more
                c = call
                call = ToolCall(c.name, c.arguments, c.bucket, c.stage, c.flags, c.repairs, ident, c.format, c.checked)
        self._emitted.append(call)
        self._events.append(CallReady(call))
