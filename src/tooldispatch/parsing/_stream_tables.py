"""The stream parser's tables: its states, the trigger patterns, the per-state character tables, the trie.

:class:`~tooldispatch.parsing.stream.StreamParser` looks each one-character delta up, by code point, in the
table of its state; held prefixes of ``<tool_call>``, ``<think>``, the reasoning closers and the declared
names step through a prefix trie (:class:`_Step`). Everything here is built once and never changed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

import regex

from tooldispatch.parsing.formats import DECLARED
from tooldispatch.parsing.formats._format import Format
from tooldispatch.parsing.reasoning import REASONING_TAGS

# Every pattern below is searched without the regex package's timeout: each alternative matches a bounded
# number of characters, so a search is linear in the text (and reading the clock would double its cost).

_SELF_HANDLED: Final = frozenset({"open_ended", "harmony", "harmony_junk"})
"""Segment kinds the stream parser handles itself (no closer): held to the end of the output, harmony headers."""


def _openers(declared: tuple[Format, ...]) -> str:
    """The formats' own segment openers (``Format.stream_openers``), one group per kind, in declaration order.

    Raises:
        ValueError: a format opens a kind that nothing closes (a format module's mistake).
    """
    groups: dict[str, list[str]] = {}
    for f in declared:
        for kind, pattern in f.stream_openers:
            groups.setdefault(kind, []).append(pattern)
    closed = {kind for f in declared for kind, _ in f.stream_closers}
    for kind in groups:
        if kind not in closed and kind not in _SELF_HANDLED:
            raise ValueError(f"stream segments of kind {kind!r} are opened but never closed; declare a closer for it")
    return "".join(f"\n  | (?P<{kind}>{'|'.join(patterns)})" for kind, patterns in groups.items())


# What may start a call (or reasoning, or a harmony header) in content: reasoning openers, the formats' own
# openers, then the shapes any format may take (a tag, a fence, a list, a brace). Each alternative is short and
# bounded, so a partial match at the end of the text is held back only briefly, and re-searching the held
# text as it grows stays linear overall (the cascade's tag pattern allows any run of spaces; here a run is
# at most 16 long). The formats' openers start with distinct literals, so their order does not matter.
_STATIC_TRIGGERS: Final = (
    f"(?P<think>{'|'.join(re.escape(opener) for opener in REASONING_TAGS)})"
    + _openers(DECLARED)
    + r"""
  | (?P<tag>(?!<\|(?:start|channel|message|constrain)\|>)<\|?[ \t]{0,16}[A-Za-z][A-Za-z0-9 _\-]{0,30}?[ \t]{0,16}\|?>)
  | (?P<fence>```)
  | (?P<list>\[[ \t\r\n]{0,8}(?:\{|[A-Za-z_][\w.]{0,64}[ \t]{0,4}\())
  | (?P<brace>\{)
"""
)
_REASONING_CLOSERS: Final = {
    **{opener: re.escape(closer) for opener, closer in REASONING_TAGS.items()},
    "harmony": r"<\|end\|>|<\|start\|>",
}
_CLOSER_PATTERNS: Final = {closer: regex.compile(closer) for closer in _REASONING_CLOSERS.values()}
_TAG_CLOSE: Final = re.compile(r"<\|?[ \t]*/[ \t]*([A-Za-z][A-Za-z0-9 _\-]{0,30}?)[ \t]*\|?>")
_CLOSERS: Final[dict[str, re.Pattern[str]]] = {
    **{kind: re.compile(pattern) for f in DECLARED for kind, pattern in f.stream_closers},
    "fence": re.compile(re.escape("```")),
}
_TAIL: Final = 64  # how much of a segment is kept to find a closing marker split across deltas

# The parser's states.
_CONTENT: Final = 0  # visible content: plain text is given out, possible call starts are held
_REASONING: Final = 1  # inside reasoning: given out as reasoning until its closer
_SEGMENT: Final = 2  # inside a held call segment, watched for its end
_CLOSED: Final = 3  # close() was called

# What the per-state tables (see _ascii_table) say about one ASCII character.
_GATHER: Final = 0  # changes nothing: gathered
_STOP: Final = 1  # may start or end something: looked at
_NAME_START: Final = 2  # a declared name's first letter: a stop unless it continues a word
_NEWLINE_STOP: Final = 3  # a newline: gathered, then what was gathered is given out
_BRACKET: Final = 4  # a bracket, quote or backslash of a balanced segment: tracked, then gathered
_WORD: Final = 5  # inside a word that may begin a declared name: stepped through the trie
_STATIC_STARTS: Final = frozenset("<[{`")
_REASONING_STOPS: Final = frozenset("<[")  # every reasoning closer starts with one of these
_BALANCED: Final = frozenset({"brace", "list", "name"})
# Segments with no marker of their own: their calls are reported at close, when the whole text shows whether
# they stand in prose (see ``parsing.earned``).
_UNDELIMITED: Final = frozenset({"brace", "list", "name", "fence"})
_BRACKET_CHARS: Final = frozenset("{}[]()\"'\\")
_CLOSING: Final = frozenset("}])")  # a balanced segment can only end at one of these
_CLOSER_LAST: Final = frozenset(">`")  # every closing marker of a held segment ends with one of these
_NOTHING: Final[frozenset[str]] = frozenset()
# Openers and closers that are plain literals: while the held text is a prefix of one, the trigger search
# would only say "partial match at the start", so it is skipped.
_LITERAL_OPENERS: Final = ("<tool_call>", "<think>")
_LITERAL_CLOSERS: Final = {re.escape(closer): closer for closer in REASONING_TAGS.values()}
_NO_STEPS: Final[dict[str, _Step]] = {}  # shared, never changed
_HOLD: Final = 32  # single characters of plain text gathered into one event (a newline releases them sooner)
_NEWLINE: Final = frozenset("\n")
_REASONING_STOPS_NL: Final = _REASONING_STOPS | _NEWLINE


class _Anything:
    """The stop set of a state that gathers nothing: it holds every character."""

    __slots__ = ()

    def __contains__(self, item: object) -> bool:
        return True


_ANYTHING: Final = _Anything()


def _ascii_table(stops: frozenset[str], names: frozenset[str] = _NOTHING) -> bytes:
    """What :meth:`StreamParser.feed` does with each ASCII character, by code point.

    ``_GATHER``, ``_STOP`` (``stops``), ``_NAME_START`` (the first letter of a declared name, ``names``) or
    ``_NEWLINE_STOP``. (``_BRACKET`` marks the balanced segments' brackets, ``_WORD`` every character of a
    word that may begin a declared name.)
    """
    return bytes(
        (_NEWLINE_STOP if char == "\n" else _STOP if char in _STATIC_STARTS or char not in names else _NAME_START)
        if char in stops
        else _GATHER
        for char in map(chr, range(128))
    )


_EVERY_ASCII: Final = bytes([_STOP]) * 128
_WORD_TABLE: Final = bytes([_WORD]) * 128  # a word that may begin a declared name: each character is looked at
_NO_ASCII: Final = bytes(128)
_REASONING_TABLE: Final = _ascii_table(_REASONING_STOPS_NL)
# A balanced segment's table: 4 for a bracket, a quote or a backslash (tracked as it is gathered), 0 for the rest.
_BALANCED_TABLE: Final = bytes(_BRACKET if char in _BRACKET_CHARS else _GATHER for char in map(chr, range(128)))
_CLOSER_TABLE: Final = _ascii_table(_CLOSER_LAST)
# Held texts the trigger search would only call "a partial match at the start": an unfinished tag name, an
# unfinished word after "[" (a pythonic list, [TOOL_CALLS], [THINK]). No alternative completes inside them.
# The patterns with ``\w`` use the regex package, so that a word character is one for the trigger search too.
_TAG_WORD: Final = re.compile(r"<[A-Za-z][A-Za-z0-9_\-]{0,29}")
_LIST_WORD: Final = regex.compile(r"\[[A-Za-z_][\w.]{0,63}")
# What may follow "<" in a trigger: a "<" followed by anything else starts none.
_AFTER_LT: Final = frozenset("|｜ \tABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_WORD_RUN: Final = regex.compile(r"[\w.]+")  # no declared name starts inside it (a name never continues a word)
_PLAIN_NAME: Final = re.compile(r"[\w.\-]+")  # a declared name the trigger search can hold back letter by letter
_WORD_ASCII: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.")  # ASCII [\w.]
_AFTER_WORD: Final = frozenset("-<[{`")  # after a word: a name character, or a trigger's start


class _Step:
    """A held prefix of a literal marker or a declared name: where each next character leads.

    Attributes:
        text: the prefix.
        marker: the prefix is a whole literal marker (one of ``_COMPLETE``), acted on at once.
        next: each character that keeps it a strict prefix (or makes a whole marker) → that step.
        ends: the characters that make it a whole declared name (see :func:`_mark_names`).
        named: a declared name is a prefix of it (itself included).
        dash: it holds a ``-`` (a name may follow one inside a word).
    """

    __slots__ = ("dash", "ends", "marker", "named", "next", "text")

    def __init__(self, text: str, marker: bool) -> None:
        self.text = text
        self.marker = marker
        self.next: dict[str, _Step] = {}
        self.ends: frozenset[str] = _NOTHING
        self.named = False
        self.dash = "-" in text


def _prefix_steps(literals: Iterable[str]) -> dict[str, dict[str, _Step]]:
    """For each strict prefix of the literals (the empty one too), where each next character leads.

    The empty prefix leads to the first characters (ASCII ones: :meth:`StreamParser.feed` looks a declared
    name's first letter up only after its ASCII word check), and the last character of a literal marker
    (one of ``_COMPLETE``) leads to the whole marker.
    """
    steps: dict[str, _Step] = {"": _Step("", False)}
    for lit in literals:
        for k in range(1, len(lit) + 1):
            if k < len(lit) or lit in _COMPLETE:
                steps.setdefault(lit[:k], _Step(lit[:k], k == len(lit)))
    for lit in literals:
        last = len(lit) if lit in _COMPLETE else len(lit) - 1
        for k in range(0 if lit[0] < "\x80" else 1, last):
            steps[lit[:k]].next[lit[k]] = steps[lit[: k + 1]]
    return {text: step.next for text, step in steps.items() if not step.marker}


def _mark_names(root: dict[str, _Step], names: Iterable[str]) -> None:
    """Note on the steps under ``root`` which characters end a declared name and which hold one as a prefix.

    A name that is a prefix of a step's text is that step or one above it, so ``named`` passes down the trie.
    """
    whole = frozenset(names)
    steps: dict[str, _Step] = {}
    todo = [(step, False) for step in root.values()]
    while todo:
        step, above = todo.pop()
        if step.text not in steps:
            steps[step.text] = step
            step.named = above or step.text in whole
            todo.extend((after, step.named) for after in step.next.values())
    for name in whole:
        before = steps.get(name[:-1])
        if before is not None:
            before.ends = before.ends | {name[-1]}


_COMPLETE: Final = frozenset({*_LITERAL_OPENERS, *_LITERAL_CLOSERS.values()})
_CLOSER_STEPS: Final = {literal: _prefix_steps([literal]) for literal in _LITERAL_CLOSERS.values()}
_TRAILING_WORD: Final = re.compile(r"(?<![\w.])[\w.\-]+\Z")


def _find_literal(literal: str, text: str) -> tuple[int, int, bool] | None:
    """What a partial search for ``literal`` finds in ``text``: (start, end, partial), or ``None``.

    The first occurrence, else the longest end of the text that begins ``literal`` (a partial match; the
    search's empty partial match at the very end holds nothing back, so it is ``None`` here). Exact for
    literals that do not overlap themselves, as every literal closer here.
    """
    at = text.find(literal)
    if at >= 0:
        return at, at + len(literal), False
    for start in range(max(0, len(text) - len(literal) + 1), len(text)):
        if literal.startswith(text[start:]):
            return start, len(text), True
    return None


def _wordish(char: str) -> bool:
    """True when a name cannot start right after ``char`` (it would continue a word)."""
    return bool(char) and (char.isalnum() or char in "_.")
