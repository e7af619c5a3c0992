"""Plain data shared by every layer: parsed calls, repairs, parse outcomes, a family's reasoning markers.

These are the values that cross seams (parser → dispatcher → agent loop → bench), so they are
small and JSON-friendly through ``to_dict``. Treat them as read-only. They are plain slotted dataclasses,
not frozen ones, because they are built for every parsed call: a frozen dataclass sets each field through
``object.__setattr__`` and costs about four times as much to build (0.66 µs against 0.16 µs for
``ToolCall`` on the project's CPU machine), and in the compiled build (mypyc) it keeps a Python
``__init__`` where a plain one gets a compiled one. The parser's internal records follow the same rule.
``Reasoning``, built once per model family, is frozen.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

Bucket = Literal[
    "ok_strict",
    "ok_fallback",
    "repaired",
    "InvalidJson",
    "UnknownName",
    "SchemaMismatch",
    "Truncated",
    "Ambiguous",
]
"""Where one call candidate ended up. The first three are accepted calls, the rest rejections.

``Ambiguous``: a call-like span in running text that was not taken as a call (more prose follows it, or it
names a side-effecting tool outside the tool-call format); its ``error`` says why and it has the ``in_prose``
flag.

The names of the rejected buckets follow OpenRouter's tool-call error telemetry so that rates can be
compared with what it publishes."""

ACCEPTED_BUCKETS: Final[frozenset[str]] = frozenset({"ok_strict", "ok_fallback", "repaired"})
REJECTED_BUCKETS: Final[frozenset[str]] = frozenset(
    {"InvalidJson", "UnknownName", "SchemaMismatch", "Truncated", "Ambiguous"}
)

Stage = Literal["native", "strict", "fallback", "repair", "none"]
"""How far down the cascade an output (or one candidate) had to go."""

RepairLevel = Literal["bounded", "lossless", "none"]
"""How much schema-guided repair is allowed.

``none``: nothing is changed. ``lossless``: only edits that cannot change meaning (case and separator
normalization of names, keys and enum values; ``"5"`` → 5; stringified JSON → parsed; optional ``null`` →
absent). ``bounded``: lossless plus unique nearest matches within a Levenshtein distance of 2."""

RepairSpec = RepairLevel | Mapping[str, RepairLevel]
"""One level for every tool, or a per-tool mapping (tools not in it get ``bounded``)."""

FLAG_IN_REASONING: Final = "in_reasoning"
FLAG_NO_CALL: Final = "no_call"
FLAG_IN_PROSE: Final = "in_prose"


def canonical_arguments(arguments: object) -> str:
    """A call's arguments as canonical JSON: keys sorted, non-ASCII kept, a JSON string decoded first.

    Arguments that JSON cannot write keep their ``repr``; arguments nested too deeply to write get a text
    no other value has.
    """
    if isinstance(arguments, str):
        text = arguments
        try:
            arguments = json.loads(text)
        except (ValueError, RecursionError):
            return text
    try:
        return json.dumps(arguments, sort_keys=True, ensure_ascii=False, default=repr)
    except RecursionError:
        return f"<nested too deeply: {id(arguments)}>"
    except (TypeError, ValueError):  # keys of mixed types, a circular value
        return repr(arguments)


def call_key(name: str | None, arguments: object) -> str:
    """A call's identity: its name and its :func:`canonical_arguments`.

    Two calls with the same key make the same request of the same tool. The agent, the parser, the proxy and
    the benchmark all tell calls apart with it.
    """
    return f"{name}\x00{canonical_arguments(arguments)}"


@dataclass(init=False, slots=True)
class Repair:
    """One recorded edit made to a call so that it fits its tool's schema.

    Attributes:
        kind: what was repaired: ``name``, ``key``, ``type``, ``enum``, ``null_optional``, ``json``
            (the arguments text needed lenient decoding), ``wrapper`` (tags or fences were off), ``doubled_braces``
            (the whole output was the call inside one extra pair of braces).
        path: JSON-pointer-like path of the edited value (``""`` for the call itself, ``"/unit"``).
        before: the value as the model wrote it.
        after: the value after the edit.
        distance: edit distance for fuzzy repairs, 0 for lossless ones.
    """

    kind: str
    path: str
    before: Any
    after: Any
    distance: int = 0

    def __init__(self, kind: str, path: str, before: Any, after: Any, distance: int = 0) -> None:
        self.kind = kind
        self.path = path
        self.before = before
        self.after = after
        self.distance = distance

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serializable form."""
        return {
            "kind": self.kind,
            "path": self.path,
            "before": self.before,
            "after": self.after,
            "distance": self.distance,
        }


@dataclass(init=False, slots=True)
class Checked:
    """The stamp of a call whose arguments satisfied their tool's schema when they were validated.

    The dispatcher runs a stamped call without validating it again, as long as the stamp is for the
    schema of the tool it dispatches to and the arguments are still what was stamped
    (``tooldispatch.repair.validate.still_valid``); any other call it validates.

    Attributes:
        schema: the parameters schema the arguments satisfied.
        arguments: the arguments as they were then, written with ``marshal``.
    """

    schema: Mapping[str, Any]
    arguments: bytes

    def __init__(self, schema: Mapping[str, Any], arguments: bytes) -> None:
        self.schema = schema
        self.arguments = arguments


@dataclass(slots=True, init=False)
class ToolCall:
    """A valid call: the tool exists and the arguments satisfy its schema.

    Attributes:
        name: the declared tool name.
        arguments: the (possibly repaired) arguments.
        bucket: ``ok_strict``, ``ok_fallback`` or ``repaired``.
        stage: the stage that produced it.
        flags: e.g. ``in_reasoning`` when the call was only found inside the reasoning.
        repairs: every edit made, in order.
        id: the call id a server gave, or one we assigned (``call_0``, ...).
        format: the tool-call format it was written in (``hermes``, ``mistral``, ``openai``, ...).
        checked: the parser's stamp that the arguments satisfied the tool's schema (see ``Checked``); ``None``
            for a call built elsewhere, which the dispatcher validates.
    """

    name: str
    arguments: dict[str, Any]
    bucket: Bucket = "ok_strict"
    stage: Stage = "strict"
    flags: frozenset[str] = frozenset()
    repairs: tuple[Repair, ...] = ()
    id: str | None = None
    format: str = ""
    checked: Checked | None = field(default=None, compare=False, repr=False)  # equal calls, stamped or not

    def __init__(
        self,
        name: str,
        arguments: dict[str, Any],
        bucket: Bucket = "ok_strict",
        stage: Stage = "strict",
        flags: frozenset[str] = frozenset(),
        repairs: tuple[Repair, ...] = (),
        id: str | None = None,
        format: str = "",
        checked: Checked | None = None,
    ) -> None:
        self.name = name
        self.arguments = arguments
        self.bucket = bucket
        self.stage = stage
        self.flags = flags
        self.repairs = repairs
        self.id = id
        self.format = format
        self.checked = checked

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serializable form."""
        return {
            "id": self.id,
            "name": self.name,
            "arguments": self.arguments,
            "bucket": self.bucket,
            "stage": self.stage,
            "format": self.format,
            "flags": sorted(self.flags),
            "repairs": [r.to_dict() for r in self.repairs],
        }


@dataclass(init=False, slots=True)
class Candidate:
    """Every call-like span the parser found, accepted or not.

    Attributes:
        raw: the text of the span as the model wrote it.
        span: start and end offsets in the text given to the parser (``(-1, -1)`` for native calls).
        format: the format that matched.
        stage: ``native``, ``strict`` or ``fallback`` (where it was found), or ``repair``.
        bucket: the outcome.
        name: the tool name as written (before repair), if one could be read.
        arguments: the decoded arguments (after repair when accepted), if any could be decoded.
        repairs: edits made.
        error: for rejected candidates, a message a model can act on.
        flags: e.g. ``in_reasoning``.
    """

    raw: str
    span: tuple[int, int]
    format: str
    stage: Stage
    bucket: Bucket
    name: str | None = None
    arguments: dict[str, Any] | None = None
    repairs: tuple[Repair, ...] = ()
    error: str | None = None
    flags: frozenset[str] = frozenset()

    def __init__(
        self,
        raw: str,
        span: tuple[int, int],
        format: str,
        stage: Stage,
        bucket: Bucket,
        name: str | None = None,
        arguments: dict[str, Any] | None = None,
        repairs: tuple[Repair, ...] = (),
        error: str | None = None,
        flags: frozenset[str] = frozenset(),
    ) -> None:
        self.raw = raw
        self.span = span
        self.format = format
        self.stage = stage
        self.bucket = bucket
        self.name = name
        self.arguments = arguments
        self.repairs = repairs
        self.error = error
        self.flags = flags

    @property
    def accepted(self) -> bool:
        """True when this candidate became a call."""
        return self.bucket in ACCEPTED_BUCKETS

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serializable form."""
        return {
            "raw": self.raw,
            "span": list(self.span),
            "format": self.format,
            "stage": self.stage,
            "bucket": self.bucket,
            "name": self.name,
            "arguments": self.arguments,
            "repairs": [r.to_dict() for r in self.repairs],
            "error": self.error,
            "flags": sorted(self.flags),
        }


@dataclass(init=False, slots=True)
class ParseOutcome:
    """What ``parse_tool_calls`` made of one model output.

    Attributes:
        calls: the valid calls, in the order they appeared.
        content: the text that is not a call and not reasoning.
        reasoning: the reasoning text, markers removed.
        candidates: every call-like span, accepted and rejected.
        stage: the deepest stage any accepted call needed (``none`` when there is no call).
        flags: ``no_call`` when nothing call-like was found; ``in_reasoning`` when calls came from there.
    """

    calls: tuple[ToolCall, ...] = ()
    content: str = ""
    reasoning: str = ""
    candidates: tuple[Candidate, ...] = ()
    stage: Stage = "none"
    flags: frozenset[str] = field(default_factory=frozenset)

    def __init__(
        self,
        calls: tuple[ToolCall, ...] = (),
        content: str = "",
        reasoning: str = "",
        candidates: tuple[Candidate, ...] = (),
        stage: Stage = "none",
        flags: frozenset[str] = frozenset(),
    ) -> None:
        self.calls = calls
        self.content = content
        self.reasoning = reasoning
        self.candidates = candidates
        self.stage = stage
        self.flags = flags

    @property
    def rejected(self) -> tuple[Candidate, ...]:
        """The candidates that did not become calls."""
        return tuple(c for c in self.candidates if not c.accepted)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serializable form."""
        return {
            "calls": [c.to_dict() for c in self.calls],
            "content": self.content,
            "reasoning": self.reasoning,
            "candidates": [c.to_dict() for c in self.candidates],
            "stage": self.stage,
            "flags": sorted(self.flags),
        }


@dataclass(frozen=True, slots=True)
class Reasoning:
    """Reasoning markers of a model family (its manifest's ``[reasoning]``), for prompting and streaming.

    Attributes:
        open: the opening marker (``<think>``).
        close: the closing marker (``</think>``).
        starts_open: the chat template already opens the block in the prompt.
    """

    open: str
    close: str
    starts_open: bool = False
