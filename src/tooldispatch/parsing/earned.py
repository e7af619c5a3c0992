"""Calls from prose are earned, not found: where a call-like span stands decides whether it is a call.

The finders report every call-like span; this module reads the text around each one and answers:

* **a call**: the span is in a delimited form (a format's markers, a tool-call wrapper tag, a python call list
  that starts a line), or it is the whole output, or the final segment of it (only calls, separators and
  whitespace after it);
* **not a call** (the span stays content): the text's shape shows it is not meant to run: it is quoted or in an
  inline code span, it stands on a log line or after a shell or REPL prompt, its sentence is a question
  (``?``, ``？``, ``¿``), or it sits in a fenced code block that prose follows (an example in an explanation);
* **ambiguous** (kept as a rejected candidate with its reason and the ``in_prose`` flag): a call in running
  text with more prose after it, or a call to a side-effecting tool that the structure does not earn.

These rules read structure only (position in the message, delimiters, punctuation, what follows the call), so
they hold in any language. Recovery strength follows side effects as repair strength does: a tool whose
repair level is not ``bounded`` (side-effecting tools, and every tool declared without metadata) takes a call
only when it is the whole output, or delimited and standing as its own statement: nothing but other calls
after it on its line, no sentence running into it on its line, and no question after it awaiting an answer.

English cue words (``never``, ``if I were to``, ``for example``) are read as well, as a narrowing on top: they
only ever turn a call into content, and no rule for a side-effecting tool depends on them. The cues are read
in a small window: the clause before the span on its line (or the line before, when the span starts a line and
that line ends with a colon), and the rest of the sentence after it.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from typing import Final

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing._typed_values import VALUE_FIXES, XML_VALUE_FORMATS
from tooldispatch.parsing.reasoning import split_reasoning

__all__ = [
    "cue_after",
    "cue_before",
    "delimited",
    "lead_refuses",
    "opens_quote",
    "prose_refuses",
    "quoted",
    "refused_before",
    "screen",
    "shape_refuses",
]

Fence = tuple[int, int, int, int]
"""A fenced block: where its opening fence starts, where its body starts and ends, where its closing fence ends."""

EARNED: Final = 0
NOT_A_CALL: Final = 1
AMBIGUOUS: Final = 2

# Formats whose finds carry no marker of their own: a bare JSON object or list, a python call.
_UNDELIMITED_STRICT: Final = frozenset({"pythonic", "llama3_json", "json"})
_UNDELIMITED_FALLBACK: Final = frozenset({"json", "named_json", "python_call", "react"})

_NEGATION: Final = (
    r"never|not|don'?t|doesn'?t|didn'?t|won'?t|wouldn'?t|shouldn'?t|can'?t|cannot|mustn'?t|avoid|"
    r"instead\s+of|rather\s+than|without|refuse|refrain"
)
_HYPOTHETICAL: Final = (
    r"if|were\s+to|(?:i|we|you|they|one)'d|(?:was|were)\s+going\s+to|(?:meant|planned|wanted)\s+to|would|could|might|suppose|supposing|imagine|hypothetical(?:ly)?|in\s+theory|pretend|"
    r"unless"
)
_EXAMPLE: Final = (
    r"examples?|e\.g|for\s+instance|such\s+as|like\s+this|like\s+so|looks?\s+like|format|syntax|usage|signature|"
    r"documentation|docs|docstring|template|schema|sample|pattern|written\s+as|you\s+(?:can|could|may|might|"
    r"should|would)|one\s+(?:can|could)|users?\s+(?:can|could)|the\s+model\s+(?:can|could|should|would)|"
    r"called\s+like|invoked\s+like|shape|illustrat\w*|demonstrat\w*|quote[sd]?|"
    r"prints?|tutorial|snippet|placeholder|in\s+the\s+prompt"
)
_NEGATION_CUE: Final = re.compile(rf"(?<![\w'])(?:{_NEGATION})(?![\w'])", re.IGNORECASE)
_SENTENCE_CUE: Final = re.compile(rf"(?<![\w'])(?:{_HYPOTHETICAL}|{_EXAMPLE})(?![\w'])", re.IGNORECASE)
_TAIL_CUE: Final = re.compile(
    r"(?<![\w'])(?:but\s+(?:I|we)\s+(?:will|shall|am|are|do|would|won'?t|don'?t)|won'?t|will\s+not|not\s+going\s+to|"
    r"(?:is|as|was)\s+(?:an?\s+|just\s+an?\s+|only\s+an?\s+)?(?:example|illustration|sample)|for\s+example|"
    r"but\s+(?:then|realised|realized|decided|changed)|if\s+(?:I|we)\b|would|could|might|hypothetical(?:ly)?|is\s+how|should\s+(?:never|not)|don'?t|do\s+not|never|"
    r"is\s+(?:what|the\s+format|the\s+syntax)|(?:is|are)\s+(?:destructive|dangerous)|by\s+mistake)(?![\w'])",
    re.IGNORECASE,
)
# Where a sentence starts (``e.g.`` and ``i.e.`` end none), and where a clause starts: a clause break or a
# conjunction that starts a new clause. A negation counts in its clause, a supposition or example in its sentence.
_SENTENCE_BREAK: Final = re.compile(r"(?<!e\.g)(?<!i\.e)[.!?](?=\s)", re.IGNORECASE)
_CLAUSE_BREAK: Final = re.compile(r"[,;]|\s(?:so|then|and\s+then|now)\s", re.IGNORECASE)
_SENTENCE_END: Final = re.compile(r"[.!?](?:\s|\Z)|\n")
_FENCE: Final = re.compile(r"^[ \t]*```[ \t]*([\w+\-]*)[ \t]*$", re.MULTILINE)
_QUOTES: Final = {
    "`": "`", '"': '"', "'": "'", "\u201c": "\u201d", "\u2018": "\u2019", "\u00ab": "\u00bb", "\u00bb": "\u00ab",
    "\u201e": "\u201c", "\u201a": "\u2018", "\u2039": "\u203a", "\u300c": "\u300d", "\u300e": "\u300f",
    "\u300a": "\u300b", "\uff02": "\uff02",
}  # fmt: skip
# Quotes that may open well before a span and close well after it on the same line: a call quoted inside a
# longer quotation or code span. The apostrophe is left out: it also marks elisions (``won't``, ``l'eau``).
_SPANNING: Final = {k: v for k, v in _QUOTES.items() if k not in ("'", "\u2018", "\u201a")}
# A line that a log, a shell or a REPL wrote: a timestamp, a bracketed field holding a digit, or a prompt.
_LOG_LINE: Final = re.compile(
    r"[ \t]*(?:\d{1,4}[-/.:]\d{1,2}|\[[^\]\n]*\d[^\]\n]*\]|(?:\$|>>>|\.\.\.|>|%|PS>|[\w.-]+@[\w.-]+:\S*[$#])[ \t])"
)
# Where a sentence ends, in any script; what may end the text that leads into a call standing on its own.
_TERMINATORS: Final = ".!?\u3002\uff01\uff1f\u2026"
_QUESTION_MARKS: Final = "?\uff1f"
_LEAD_ENDS: Final = ".!?:;\u3002\uff01\uff1f\uff1a\uff1b\u2026"
# Special tokens and tags around a call (``<|im_end|>``, ``</s>``, ``[/INST]``): markup, not prose.
_MARKUP: Final = re.compile(r"<\|[^\n]*?\|>|<[^<>\n]{0,80}>|\[/?[A-Z_]{2,20}\]")
_TRAILING_TEXT: Final = " \t\r\n,;"
_MORE_SENTENCES: Final = re.compile(r"[.!?:]\s+\S|\n")
_WINDOW: Final = 240  # how far back and ahead a cue is looked for


def screen(
    view: str, found: Sequence[RawCall], delimited_only: Callable[[str | None], bool]
) -> tuple[list[RawCall], list[tuple[RawCall, str]]]:
    """Split the finds of one text view into calls and ambiguous candidates; drop what is not a call.

    Args:
        view: the text the finds' spans refer to (the content, or the reasoning, view).
        found: the finds, in text order, not overlapping.
        delimited_only: whether a call to this name is taken only in a delimited form (a side-effecting tool).

    Returns:
        The finds that are calls, and the ambiguous ones with the reason each is not taken.
    """
    if not found:
        return [], []
    fences = _fences(view) if "```" in view else []
    around = _Around(view, [raw.span for raw in found if raw.span[0] >= 0])
    calls: list[RawCall] = []
    ambiguous: list[tuple[RawCall, str]] = []
    for raw in found:
        verdict, reason = _verdict(view, raw, around, fences, delimited_only)
        if verdict == EARNED:
            calls.append(raw)
        elif verdict == AMBIGUOUS:
            ambiguous.append((raw, reason))
    return calls, ambiguous


def delimited(raw: RawCall) -> bool:
    """True when the find carries its own markers (a format's tokens or tags, a tool-call wrapper tag)."""
    fmt = raw.format
    if raw.stage == "fallback":
        if fmt.startswith("tag:") or fmt == "named_tag":
            return True
        # An XML-parameter call whose markup was complete and one value needed reading as a literal.
        return fmt in XML_VALUE_FORMATS and VALUE_FIXES.issuperset(raw.lenient)
    if fmt in _UNDELIMITED_STRICT:
        return raw.raw[:1] not in ("{", "[")
    return True


class _Around:
    """What surrounds each find, computed once per text (a text may hold thousands of finds).

    ``blank_from[j]``: only finds, separators and whitespace from find ``j`` on; ``final_from[j]``: from find
    ``j`` on, the text that is not a find is at most the rest of one sentence; ``blank_to[j]``: only finds,
    separators and whitespace before find ``j``.
    """

    __slots__ = ("blank_from", "blank_to", "ends", "final_from", "starts", "view")

    def __init__(self, view: str, spans: Sequence[tuple[int, int]]) -> None:
        self.view = view
        self.starts = [s for s, _ in spans]
        self.ends = [e for _, e in spans]
        count = len(spans)
        self.blank_from = [True] * (count + 1)
        self.final_from = [True] * (count + 1)
        for j in range(count - 1, -1, -1):
            gap = view[self.ends[j] : self.starts[j + 1] if j + 1 < count else len(view)]
            self.blank_from[j], self.final_from[j] = self._joined(gap, j + 1)
        self.blank_to = [True] * (count + 1)
        pos = 0
        for j in range(count):
            self.blank_to[j] = (j == 0 or self.blank_to[j - 1]) and _blank(view, pos, self.starts[j])
            pos = self.ends[j]

    def _joined(self, gap: str, j: int) -> tuple[bool, bool]:
        """Whether ``gap`` followed by what comes from find ``j`` on is blank, and at most one sentence."""
        if self.blank_from[j]:
            rest = gap.strip(_TRAILING_TEXT)
            return not rest, _MORE_SENTENCES.search(rest) is None
        lead = gap.lstrip(_TRAILING_TEXT)
        if not lead:
            return False, self.final_from[j]
        return False, self.final_from[j] and _MORE_SENTENCES.search(lead + "x") is None

    def after(self, end: int) -> tuple[bool, bool]:
        """Whether the text after ``end`` (finds aside) is blank, and whether it is at most one sentence."""
        j = bisect.bisect_left(self.starts, end)
        stop = self.starts[j] if j < len(self.starts) else len(self.view)
        return self._joined(self.view[end:stop], j)

    def floor(self, start: int) -> int:
        """The end of the last find that ends at or before ``start`` (0 for none)."""
        j = bisect.bisect_right(self.ends, start) - 1
        return self.ends[j] if j >= 0 else 0

    def ceiling(self, end: int) -> int:
        """The start of the first find that starts at or after ``end`` (the text's end for none)."""
        j = bisect.bisect_left(self.starts, end)
        return self.starts[j] if j < len(self.starts) else len(self.view)

    def before(self, start: int) -> bool:
        """Whether only finds, separators and whitespace come before ``start``."""
        j = bisect.bisect_right(self.ends, start) - 1
        if j < 0:
            return _blank(self.view, 0, start)
        return self.blank_to[j] and _blank(self.view, self.ends[j], start)


def _verdict(
    view: str,
    raw: RawCall,
    around: _Around,
    fences: Sequence[Fence],
    delimited_only: Callable[[str | None], bool],
) -> tuple[int, str]:
    start, end = raw.span
    if start < 0:
        return EARNED, ""
    fence = _fence_around(fences, start, end)
    unit_start, unit_end = (fence[0], fence[3]) if fence is not None else (start, end)
    if fence is None and raw.format.startswith("fence:"):
        unit_start, unit_end = start, end
    floor, ceiling = around.floor(unit_start), around.ceiling(unit_end)
    if prose_refuses(view, unit_start, unit_end, floor, ceiling):
        return NOT_A_CALL, ""
    blank_after, final = around.after(unit_end)
    first = around.before(unit_start)
    whole = first and blank_after
    side_effecting = delimited_only(raw.name)
    # The final segment: only the rest of the sentence follows, and ends the output. The leading segment:
    # nothing before it, and it stands on its own lines.
    leading = first and _line_ends(view, unit_end)
    if fence is not None or raw.format.startswith("fence:"):
        if not blank_after:
            return NOT_A_CALL, ""  # a fenced block that prose follows is an example
        if whole or not side_effecting:
            return EARNED, ""
        return AMBIGUOUS, _side_effect_reason(raw.name)
    if whole:
        return EARNED, ""
    if delimited(raw) or (side_effecting and (_marked(raw) or _listed(view, raw, unit_end))):
        if not side_effecting:
            return EARNED, ""
        why = _not_standing(view, unit_start, unit_end, floor, ceiling, blank_after)
        return (EARNED, "") if why is None else (AMBIGUOUS, _side_effect_reason(raw.name, why))
    if not (final or leading):
        return AMBIGUOUS, (
            "this call-like text stands in the middle of prose, so it was not taken as a call; send the call in "
            "the tool-call format, or alone, to make it one."
        )
    if side_effecting:
        return AMBIGUOUS, _side_effect_reason(raw.name)
    return EARNED, ""


def _marked(raw: RawCall) -> bool:
    """A format's own opening marker read leniently: an unclosed final ``<tool_call>``, ``[TOOL_CALLS]`` missing
    its closers."""
    fmt = raw.format
    return (
        raw.stage == "fallback"
        and fmt not in _UNDELIMITED_FALLBACK
        and fmt not in XML_VALUE_FORMATS
        and raw.raw[:1] in ("<", "[")
    )


def _listed(view: str, raw: RawCall, end: int) -> bool:
    """A python call list (``[f(a=1)]``) that starts a line (where the finder looks) and ends one or the text."""
    return raw.format == "pythonic" and raw.raw[:1] == "[" and (end == len(view) or _line_ends(view, end))


def _not_standing(view: str, start: int, end: int, floor: int, ceiling: int, blank_after: bool) -> str | None:
    """Why a delimited call to a side-effecting tool does not stand as its own statement, or ``None`` when it does.

    It stands when no prose follows it on its line, no sentence runs into it on its line (the text before it
    there, markup aside, is empty or ends a sentence or a colon), and the text after it does not end in a
    question (a plan awaiting an answer).
    """
    line_end = view.find("\n", end)
    tail = _MARKUP.sub("", view[end : min(ceiling, len(view) if line_end < 0 else line_end)])
    if any(c.isalnum() or c in _TERMINATORS for c in tail):
        return "prose follows it on its line"
    lead = _MARKUP.sub("", view[max(floor, view.rfind("\n", 0, start) + 1) : start]).rstrip()
    if any(c.isalnum() for c in lead) and lead[-1] not in _LEAD_ENDS:
        return "a sentence runs into it on its line"
    if not blank_after and view[end:].rstrip()[-1:] in tuple(_QUESTION_MARKS):
        return "the text after it asks a question, so it awaits an answer"
    return None


def _line_ends(view: str, end: int) -> bool:
    """True when only spaces come between ``end`` and the next line break."""
    i = end
    while i < len(view) and view[i] in " \t\r":
        i += 1
    return i < len(view) and view[i] == "\n"


def _side_effect_reason(name: str | None, why: str = "") -> str:
    where = f"it is in the tool-call format but {why}" if why else "it was found in running text"
    return (
        f"{name or 'this tool'} may have side effects (it is not declared read-only), and {where}, so it was not "
        "taken as a call; send it in the tool-call format, on its own line, to run it."
    )


def prose_refuses(view: str, start: int, end: int, floor: int = 0, ceiling: int = -1) -> bool:
    """True when the text around ``view[start:end]`` shows it is not a call (it is then content).

    The shape of the text decides first (:func:`shape_refuses`); the English cues then narrow further. The text
    read goes back no further than ``floor`` and on no further than ``ceiling`` (the neighbouring finds: a cue
    inside another call is not about this one).
    """
    return (
        shape_refuses(view, start, end, floor, ceiling)
        or cue_before(view, start, floor)
        or cue_after(view, end, ceiling)
    )


def shape_refuses(view: str, start: int, end: int, floor: int = 0, ceiling: int = -1) -> bool:
    """True when the span is quoted or in a code span, stands on a log or prompt line, or its sentence asks.

    Punctuation and position only, so it holds in any language: a quote or backtick right around the span, or
    a quotation or code span that opens before it and closes after it on its line; a line that starts with a
    timestamp, a bracketed field holding a digit, or a shell or REPL prompt; a sentence that ends with ``?`` or
    ``？`` after the span, or that opened with ``¿`` before it.
    """
    if quoted(view, start, end):
        return True
    hi = len(view) if ceiling < 0 else ceiling
    line_start = view.rfind("\n", 0, start) + 1
    line_end = view.find("\n", end, hi)
    lead = view[max(floor, line_start) : start]
    tail = view[end : hi if line_end < 0 else line_end]
    if lead and _LOG_LINE.match(view, line_start, start) is not None:
        return True
    if lead and tail and _inside_quotation(lead, tail):
        return True
    return _asks(view, start, end, floor, hi)


def lead_refuses(view: str, start: int, floor: int = 0, *, side_effecting: bool = False) -> bool:
    """What the text before ``start`` alone says (a stream decides before the text after a call arrives).

    True when a quote opens right before the span, its line is a log or prompt line, an English cue leads to
    it, or (``side_effecting``) a sentence runs into it on its line.
    """
    line_start = view.rfind("\n", 0, start) + 1
    lead = view[max(floor, line_start) : start]
    if opens_quote(view, start) or (lead and _LOG_LINE.match(view, line_start, start) is not None):
        return True
    if side_effecting:
        bare = _MARKUP.sub("", lead).rstrip()
        if any(c.isalnum() for c in bare) and bare[-1] not in _LEAD_ENDS:
            return True
    return cue_before(view, start, floor)


def refused_before(chunks: Sequence[str], segment: str, window: int, side_effecting: bool, opened: bool) -> bool:
    """What a stream can say of a call segment (the end of ``chunks``) before the text after it arrives.

    A delimited segment (``window``: how many characters back are read): :func:`lead_refuses`. A bare or fenced
    one (``window`` 0: all the text is read, ``opened``: the prompt opened a reasoning block): a side-effecting
    tool's call is no call when content (outside the reasoning) came before it, as only the whole output earns it.
    """
    recent, size = [], 0
    for chunk in reversed(chunks):
        recent.append(chunk)
        size += len(chunk)
        if window and size > window:
            break
    view = "".join(reversed(recent))
    start = view.rfind(segment)
    if start <= 0:
        return False
    if window:
        return lead_refuses(view, start, side_effecting=side_effecting)
    content = split_reasoning(view[:start], reasoning_open=opened).view("content")
    return side_effecting and not _blank(content, 0, len(content))


def _inside_quotation(lead: str, tail: str) -> bool:
    """Whether a quotation or code span opened in ``lead`` is still open and closes in ``tail``."""
    for opener, closer in _SPANNING.items():
        at = lead.rfind(opener)
        if at < 0:
            continue
        if opener == closer:
            if lead.count(opener) % 2 == 1 and closer in tail:
                return True
        elif lead.find(closer, at + 1) < 0 and closer in tail:
            return True
    return False


def _asks(view: str, start: int, end: int, floor: int, hi: int) -> bool:
    """Whether the sentence holding the span is a question: ``?``/``？`` ends it, or ``¿`` opened it."""
    for i in range(end, min(hi, end + _WINDOW)):
        c = view[i]
        if c in _QUESTION_MARKS:
            return True
        if c in _TERMINATORS or c == "\n":
            break
    lo = max(floor, start - _WINDOW, view.rfind("\n", 0, start) + 1)
    for i in range(start - 1, lo - 1, -1):
        c = view[i]
        if c == "\u00bf":
            return True
        if c in _TERMINATORS:
            break
    return False


def opens_quote(view: str, start: int) -> bool:
    """True when a quote or backtick comes right before ``start``."""
    return start > 0 and view[start - 1] in _QUOTES


def quoted(view: str, start: int, end: int) -> bool:
    """True when the span is quoted inline: a quote or backtick right before it and its closer right after."""
    if start == 0 or end >= len(view):
        return False
    closer = _QUOTES.get(view[start - 1])
    return closer is not None and view[end] == closer


def cue_before(view: str, start: int, floor: int = 0) -> bool:
    """A negation, hypothesis or example cue in the clause that leads to ``start`` (not before ``floor``)."""
    lo = max(floor, start - _WINDOW)
    line_start = view.rfind("\n", lo, start) + 1
    if line_start < lo:
        line_start = lo
    lead = view[line_start:start]
    if (not lead or lead.isspace()) and line_start > lo:
        # The span starts its line: the line before introduces it when it ends with a colon.
        prev_end = line_start - 1
        while prev_end > lo and view[prev_end - 1] in " \t\r\n":
            prev_end -= 1
        prev_start = max(lo, view.rfind("\n", lo, prev_end) + 1)
        prev = view[prev_start:prev_end]
        if not prev.rstrip().endswith(":"):
            return False
        lead = prev
    elif not lead or lead.isspace():
        return False
    sentence = 0
    for m in _SENTENCE_BREAK.finditer(lead):
        sentence = m.end()
    if _SENTENCE_CUE.search(lead, sentence) is not None:
        return True
    clause = sentence
    for m in _CLAUSE_BREAK.finditer(lead, sentence):
        clause = m.end()
    return _NEGATION_CUE.search(lead, clause) is not None


def cue_after(view: str, end: int, ceiling: int = -1) -> bool:
    """A cue in the rest of the sentence after ``end`` (``..., but I will not``), not past ``ceiling``."""
    hi = min(len(view) if ceiling < 0 else ceiling, end + _WINDOW)
    stop = _SENTENCE_END.search(view, end, hi)
    tail = view[end : stop.start() if stop is not None else hi]
    return not tail.isspace() and bool(tail) and _TAIL_CUE.search(tail) is not None


def _blank(view: str, lo: int, hi: int) -> bool:
    return not view[lo:hi].strip(_TRAILING_TEXT)


def _fences(view: str) -> list[Fence]:
    """Fenced blocks: (fence start, body start, body end, fence end); an unclosed one runs to the end."""
    out: list[Fence] = []
    opened: tuple[int, int] | None = None
    for m in _FENCE.finditer(view):
        if opened is None:
            body = m.end() + 1 if m.end() < len(view) else m.end()
            opened = (m.start(), body)
        else:
            out.append((opened[0], opened[1], m.start(), m.end()))
            opened = None
    if opened is not None:
        out.append((opened[0], opened[1], len(view), len(view)))
    return out


def _fence_around(fences: Sequence[Fence], start: int, end: int) -> Fence | None:
    """The fenced block whose body holds ``[start, end)``, if any (fences are in text order, never nested)."""
    i = bisect.bisect_right(fences, start, key=_fence_start) - 1
    if i >= 0 and fences[i][1] <= start and end <= fences[i][2]:
        return fences[i]
    return None


def _fence_start(fence: Fence) -> int:
    return fence[0]
