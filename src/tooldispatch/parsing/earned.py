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

import re
from collections.abc import Callable, Sequence
from typing import Final

from tooldispatch.parsing._raw import RawCall

__all__ = ["cue_after", "cue_before", "delimited", "opens_quote", "prose_refuses", "quoted", "screen"]

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
    spans = [raw.span for raw in found]
    calls: list[RawCall] = []
    ambiguous: list[tuple[RawCall, str]] = []
    for index, raw in enumerate(found):
        verdict, reason = _verdict(view, raw, index, spans, fences, delimited_only)
        if verdict == EARNED:
            calls.append(raw)
        elif verdict == AMBIGUOUS:
            ambiguous.append((raw, reason))
    return calls, ambiguous


def delimited(raw: RawCall) -> bool:
    """True when the find carries its own markers (a format's tokens or tags, a tool-call wrapper tag)."""
    fmt = raw.format
    if raw.stage == "fallback":
        return fmt.startswith("tag:")
    if fmt in _UNDELIMITED_STRICT:
        return raw.raw[:1] not in ("{", "[")
    return True


def _verdict(
    view: str,
    raw: RawCall,
    index: int,
    spans: Sequence[tuple[int, int]],
    fences: Sequence[tuple[int, int, int, int]],
    delimited_only: Callable[[str | None], bool],
) -> tuple[int, str]:
    start, end = raw.span
    if start < 0:
        return EARNED, ""
    fence = _fence_around(fences, start, end)
    unit_start, unit_end = (fence[0], fence[3]) if fence is not None else (start, end)
    if fence is None and raw.format.startswith("fence:"):
        unit_start, unit_end = start, end
    if prose_refuses(view, unit_start, unit_end):
        return NOT_A_CALL, ""
    rest = _rest(view, unit_end, spans, index)
    first = _only_calls_before(view, unit_start, spans, index)
    whole = first and not rest
    # The final segment: only the rest of the sentence follows, and ends the output. The leading segment:
    # nothing before it, and it stands on its own lines.
    final = not rest or _MORE_SENTENCES.search(rest) is None
    leading = first and _line_ends(view, unit_end)
    if fence is not None or raw.format.startswith("fence:"):
        if rest:
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


def prose_refuses(view: str, start: int, end: int, floor: int = 0) -> bool:
    """True when the text around ``view[start:end]`` quotes, negates or supposes it (it is then not a call)."""
    return quoted(view, start, end) or cue_before(view, start, floor) or cue_after(view, end)


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
    if not lead.strip() and line_start > lo:
        # The span starts its line: the line before introduces it when it ends with a colon.
        prev_end = line_start - 1
        while prev_end > lo and view[prev_end - 1] in " \t\r\n":
            prev_end -= 1
        prev_start = view.rfind("\n", lo, prev_end) + 1
        prev = view[prev_start:prev_end]
        if not prev.rstrip().endswith(":"):
            return False
        lead = prev
    sentence = 0
    for m in _SENTENCE_BREAK.finditer(lead):
        sentence = m.end()
    if _SENTENCE_CUE.search(lead, sentence) is not None:
        return True
    clause = sentence
    for m in _CLAUSE_BREAK.finditer(lead, sentence):
        clause = m.end()
    return _NEGATION_CUE.search(lead, clause) is not None


def cue_after(view: str, end: int) -> bool:
    """A cue in the rest of the sentence after ``end`` (``..., but I will not``)."""
    hi = min(len(view), end + _WINDOW)
    stop = _SENTENCE_END.search(view, end, hi)
    tail = view[end : stop.start() if stop is not None else hi]
    return _TAIL_CUE.search(tail) is not None


def _rest(view: str, end: int, spans: Sequence[tuple[int, int]], index: int) -> str:
    """The text after ``end`` that is not part of a later find, stripped."""
    pieces: list[str] = []
    pos = end
    for s, e in spans[index + 1 :]:
        if e <= pos:
            continue
        if s > pos:
            pieces.append(view[pos:s])
        pos = max(pos, e)
    pieces.append(view[pos:])
    return "".join(pieces).strip(_TRAILING_TEXT)


def _only_calls_before(view: str, start: int, spans: Sequence[tuple[int, int]], index: int) -> bool:
    """True when only earlier finds, separators and whitespace come before ``start``."""
    pos = 0
    for s, e in spans[:index]:
        if s >= start:
            break
        if s > pos and not _blank(view, pos, s):
            return False
        pos = max(pos, e)
    return _blank(view, pos, start)


def _blank(view: str, lo: int, hi: int) -> bool:
    return not view[lo:hi].strip(_TRAILING_TEXT)


def _fences(view: str) -> list[tuple[int, int, int, int]]:
    """Fenced blocks: (fence start, body start, body end, fence end); an unclosed one runs to the end."""
    out: list[tuple[int, int, int, int]] = []
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


def _fence_around(
    fences: Sequence[tuple[int, int, int, int]], start: int, end: int
) -> tuple[int, int, int, int] | None:
    for fence in fences:
        if fence[1] <= start and end <= fence[2]:
            return fence
    return None
