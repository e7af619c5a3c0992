"""Calls from prose are earned, not found: where a call-like span stands decides whether it is a call.

The finders report every call-like span; this module reads the text around each one and answers:

* **a call**: the span is in a delimited form (a format's markers, a tool-call wrapper tag), or it is the
  whole output, or the final segment of it (only calls, separators and whitespace after it);
* **not a call** (the span stays content): it is negated, hypothetical or quoted as an example (``Never call
  delete_file(...)``, ``If I were to call ... but I will not``, ``For example: ...``, inline code in
  backticks), or it sits in a fenced code block that prose follows (an example in an explanation);
* **ambiguous** (kept as a rejected candidate with its reason and the ``in_prose`` flag): a call in running
  text with more prose after it, or a call to a side-effecting tool that is not delimited.

Recovery strength follows side effects as repair strength does: a tool whose repair level is not
``bounded`` (side-effecting tools get ``lossless`` from the registry) takes only delimited calls or the whole
output, never a call found in running text.

The cues are read in a small window: the clause before the span on its line (or the line before, when the
span starts a line and that line ends with a colon), and the rest of the sentence after it.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from typing import Final

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing._typed_values import VALUE_FIXES, XML_VALUE_FORMATS

__all__ = ["cue_after", "cue_before", "delimited", "opens_quote", "prose_refuses", "quoted", "screen"]

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
_QUOTES: Final = {"`": "`", '"': '"', "'": "'", "\u201c": "\u201d", "\u2018": "\u2019", "\u00ab": "\u00bb"}
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
    if prose_refuses(view, unit_start, unit_end, around.floor(unit_start), around.ceiling(unit_end)):
        return NOT_A_CALL, ""
    blank_after, final = around.after(unit_end)
    first = around.before(unit_start)
    whole = first and blank_after
    # The final segment: only the rest of the sentence follows, and ends the output. The leading segment:
    # nothing before it, and it stands on its own lines.
    leading = first and _line_ends(view, unit_end)
    if fence is not None or raw.format.startswith("fence:"):
        if not blank_after:
            return NOT_A_CALL, ""  # a fenced block that prose follows is an example
        if whole or not delimited_only(raw.name):
            return EARNED, ""
        return AMBIGUOUS, _side_effect_reason(raw.name)
    if delimited(raw) or whole:
        return EARNED, ""
    if not (final or leading):
        return AMBIGUOUS, (
            "this call-like text stands in the middle of prose, so it was not taken as a call; send the call in "
            "the tool-call format, or alone, to make it one."
        )
    if delimited_only(raw.name):
        return AMBIGUOUS, _side_effect_reason(raw.name)
    return EARNED, ""


def _line_ends(view: str, end: int) -> bool:
    """True when only spaces come between ``end`` and the next line break."""
    i = end
    while i < len(view) and view[i] in " \t\r":
        i += 1
    return i < len(view) and view[i] == "\n"


def _side_effect_reason(name: str | None) -> str:
    return (
        f"{name or 'this tool'} has side effects, and this call was found in running text rather than in the "
        "tool-call format or alone; send it in the tool-call format to run it."
    )


def prose_refuses(view: str, start: int, end: int, floor: int = 0, ceiling: int = -1) -> bool:
    """True when the text around ``view[start:end]`` quotes, negates or supposes it (it is then not a call).

    The text read goes back no further than ``floor`` and on no further than ``ceiling`` (the neighbouring
    finds: a cue inside another call is not about this one).
    """
    return quoted(view, start, end) or cue_before(view, start, floor) or cue_after(view, end, ceiling)


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
