"""``parse_tool_calls``: the cascade from raw model output to valid tool calls.

reasoning split → strict formats on the content → the server's native calls → fallback on what strict
left → (only when nothing call-like is outside the reasoning) strict + fallback on the reasoning →
schema-guided repair and validation of every candidate → one bucket per candidate.

``tolerant=False`` keeps the first step alone, as a strict server-side parser reads: the strict formats on the
content, each call as written; everything else stays text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from tooldispatch.errors import ConfigError
from tooldispatch.parsing._markers import for_view, scan_markers
from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing._typed_values import XML_VALUE_FORMATS, typed_call
from tooldispatch.parsing.earned import screen
from tooldispatch.parsing.fallback import FIX_TAG, find_fallback
from tooldispatch.parsing.finders import find_strict
from tooldispatch.parsing.formats._common import (
    FIX_ARGUMENTS_STRING,
    FIX_FENCE,
    FIX_INCOMPLETE,
    FIX_UNCLOSED,
    unclosed_brackets,
)
from tooldispatch.parsing.lane import strict_outcome
from tooldispatch.parsing.lenient import FIX_DOUBLED_BRACES, LenientJSONError, doubled_braces, loads_lenient
from tooldispatch.parsing.native import read_native_calls
from tooldispatch.parsing.reasoning import split_reasoning
from tooldispatch.repair import RepairResult, repair_call, resolve_name
from tooldispatch.repair.validate import fast_check, stamp
from tooldispatch.toolspec import ToolsInput, ToolSpec, normalize_tools
from tooldispatch.types import (
    FLAG_IN_PROSE,
    FLAG_IN_REASONING,
    FLAG_NO_CALL,
    Bucket,
    Candidate,
    ParseOutcome,
    Repair,
    RepairLevel,
    RepairSpec,
    Stage,
    ToolCall,
    call_key,
)

_LEVELS: Final[frozenset[str]] = frozenset({"bounded", "lossless", "none"})
_STAGE_ORDER: Final[tuple[Stage, ...]] = ("none", "native", "strict", "fallback", "repair")
_STAGE_RANK: Final[dict[str, int]] = {stage: rank for rank, stage in enumerate(_STAGE_ORDER)}
_NO_FLAGS: Final[frozenset[str]] = frozenset()
_NO_CALL: Final = frozenset({FLAG_NO_CALL})
_IN_REASONING: Final = frozenset({FLAG_IN_REASONING})
_IN_PROSE: Final = frozenset({FLAG_IN_PROSE})
_WRAPPER_FIXES: Final = frozenset({FIX_UNCLOSED, FIX_FENCE, FIX_TAG})
_OWN_KIND_FIXES: Final = frozenset({FIX_DOUBLED_BRACES})  # tolerances recorded as a Repair of their own kind
_TAG_ONLY_FORMATS: Final = frozenset({"auto", "hermes", "qwen", "hermes_list"})
_JSON_FORMATS: Final = frozenset({"auto", "llama3_json", "llama3", "json"})
_STRING_FIX: Final = (FIX_ARGUMENTS_STRING,)  # the tolerance of arguments written as a JSON string


def parse_tool_calls(
    text: object,
    tools: ToolsInput,
    *,
    reasoning: str | None = None,
    native_calls: Sequence[Any] | None = None,
    finish_reason: str | None = None,
    tool_format: str = "auto",
    reasoning_open: bool = False,
    repair: RepairSpec | None = None,
    strict_lane: bool = True,
    tolerant: bool = True,
) -> ParseOutcome:
    """Turn one raw model output into tool calls, content and reasoning.

    Args:
        text: the raw output as a str (content as the model wrote it, reasoning markers included); ``None``
            reads as empty. It is typed ``object`` so that any other value gets the ``TypeError`` below, in the
            compiled build too.
        tools: the OpenAI tools list, bare function dicts, or ``{name: ToolSpec}``.
        reasoning: the reasoning the backend already split off (``Completion.reasoning``), when ``text`` is
            the content alone. Its calls are recovered, flagged ``in_reasoning``, only when there is no call
            outside it; their spans then refer to this string.
        native_calls: the ``tool_calls`` a server already extracted: OpenAI dicts, SDK objects or the
            backend's ``NativeCall`` values; their ``arguments`` strings are decoded leniently and repaired
            like everything else.
        finish_reason: the server's finish reason; ``"length"`` turns a call cut off at the end into a
            ``Truncated`` candidate instead of a malformed one.
        tool_format: ``"auto"`` (run every format whose markers appear) or one name of
            ``tooldispatch.parsing.formats.FORMATS`` (``hermes``, ``mistral``, ``harmony``, ...).
        reasoning_open: the prompt already opened a reasoning block (``<think>``), so the output starts
            inside it.
        repair: ``None`` (each tool's own ``ToolSpec.repair``: ``Registry.specs()`` gives side-effecting tools
            ``lossless``), or ``"bounded"``, ``"lossless"`` or ``"none"`` for every tool, or a mapping from
            declared tool name to level (tools not in it keep their own). The level also says where a call may
            be found: only a ``bounded`` tool takes a call recovered from running text.
        strict_lane: read the common well-formed shapes straight to their outcome (``parsing.lane``) before
            the cascade; ``False`` runs the cascade alone (the outcome is the same: tests compare both).
        tolerant: ``False`` reads only what the strict formats find in the content, as written: no lenient
            decoding or tag tolerance, no doubled braces, no fallback on running text, no calls recovered from
            the reasoning. A call that needed any of them, or could not be decoded, or was cut off, stays in the
            content as text, which is what a server's strict tool parser does with it. Schema repair is still
            ``repair``'s to choose.

    Returns:
        The calls, content, reasoning, every candidate with its bucket, the deepest stage needed and
        the ``no_call``/``in_reasoning`` flags. Lenient decoding and tag tolerances appear in a call's
        ``repairs`` as ``Repair(kind="json" | "wrapper", path="", before=<tolerance name>, after=None)``; a whole
        output that is one call inside doubled braces (``{{"name": ..., "arguments": {...}}}``) is read with
        ``Repair(kind="doubled_braces", path="", before="doubled_braces", after=None)``.

    Raises:
        ConfigError: the tools, ``tool_format`` or ``repair`` are invalid (never because of the text).
        TypeError: ``text`` is not a str (or ``None``).
    """
    return _parse(
        text,
        tools,
        reasoning or "",
        native_calls,
        finish_reason,
        tool_format,
        reasoning_open,
        repair,
        strict_lane and tolerant,
        tolerant,
    )


def _parse(
    text: object,
    tools: ToolsInput,
    given_reasoning: str,
    native_calls: Sequence[Any] | None,
    finish_reason: str | None,
    tool_format: str,
    reasoning_open: bool,
    repair: RepairSpec | None,
    strict_lane: bool,
    tolerant: bool,
) -> ParseOutcome:
    """:func:`parse_tool_calls`."""
    if repair is not None and (type(repair) is not str or repair not in _LEVELS):
        _check_repair(repair)
    if strict_lane and not native_calls and tool_format in _TAG_ONLY_FORMATS and type(text) is str:
        # The strict lane looks names up itself (a value that is not a ToolSpec sends the text on).
        lookup = tools if type(tools) is dict else normalize_tools(tools)
        quick = strict_outcome(text, lookup, tool_format == "auto", reasoning_open)
        if quick is not None and not given_reasoning:
            return quick
        if quick is not None and quick.calls and FLAG_IN_REASONING not in quick.flags:
            return ParseOutcome(
                quick.calls, quick.content, _joined(given_reasoning, quick.reasoning), quick.candidates, quick.stage,
                quick.flags,
            )  # fmt: skip
        specs = lookup if lookup is not tools else normalize_tools(tools)
    else:
        specs = normalize_tools(tools)
    if text is None:
        text = ""
    elif not isinstance(text, str):
        raise TypeError(f"text must be the model's output as a str, not {type(text).__name__}; decode bytes first")
    markers = scan_markers(text)
    split = split_reasoning(text, reasoning_open=reasoning_open, markers=markers)
    content_view = split.view("content")

    def delimited_only(name: str | None) -> bool:
        # The tool's own level says whether it has side effects; a caller's level for every tool (``"none"`` to
        # measure the stages without repair) does not.
        return _level_for(name, specs, None) != "bounded"

    natives = read_native_calls(native_calls or ())
    if tolerant:
        found = _find(content_view, specs, tool_format, markers)
    else:
        found = _as_written(content_view, specs, tool_format, markers)
    outside, unsure = screen(content_view, found, delimited_only)
    removed = [raw.span for raw in outside]
    if natives:
        # A server that extracted calls may also leave them in the text: count each once.
        native_keys = {call_key(raw.name, raw.arguments) for raw, _ in natives}
        outside = [raw for raw in outside if raw.name is None or call_key(raw.name, raw.arguments) not in native_keys]
    inside: list[RawCall] = []
    if tolerant and not natives and not outside and split.has_reasoning:
        view = split.view("reasoning")
        inside, unsure_inside = screen(view, _find(view, specs, tool_format, markers), delimited_only)
        unsure += unsure_inside
    if tolerant and not natives and not outside and not inside and given_reasoning:
        found = _find(given_reasoning, specs, tool_format, scan_markers(given_reasoning))
        inside, unsure_given = screen(given_reasoning, found, delimited_only)
        unsure += unsure_given
    outside += [_unearned(raw, why) for raw, why in unsure]
    outside.sort(key=_start)
    content = _content(text, split.spans("content"), removed)
    reasoning = _joined(given_reasoning, split.reasoning)

    return _outcome(natives, outside, inside, content, reasoning, specs, repair, finish_reason)


def _joined(given: str, split: str) -> str:
    """The reasoning the backend split off, then any the text itself held."""
    given = given.strip()
    return f"{given}\n{split}" if given and split else given or split


def _start(raw: RawCall) -> int:
    return raw.span[0]


def _unearned(raw: RawCall, why: str) -> RawCall:
    """The find kept as an ambiguous candidate: flagged ``in_prose``, with the reason it is not a call."""
    return RawCall(
        raw.span, raw.raw, raw.format, raw.stage, raw.name, raw.arguments, raw.arguments_text, raw.decode_error,
        raw.truncated, raw.lenient, raw.flags | _IN_PROSE, why,
    )  # fmt: skip


def _outcome(
    natives: Sequence[tuple[RawCall, str | None]],
    outside: Sequence[RawCall],
    inside: Sequence[RawCall],
    content: str,
    reasoning: str,
    specs: Mapping[str, ToolSpec],
    repair: RepairSpec | None,
    finish_reason: str | None,
) -> ParseOutcome:
    """Repair, validate and bucket the calls found, and build the outcome."""
    candidates: list[Candidate] = []
    calls: list[ToolCall] = []
    used_ids = {ident for _, ident in natives if ident is not None}
    # A model stuck in a loop repeats one call many times: repair and validate each distinct call once.
    repaired: dict[tuple[str | None, str, str], RepairResult] = {}
    entries: list[tuple[RawCall, str | None, frozenset[str]]] = [(raw, ident, _NO_FLAGS) for raw, ident in natives]
    entries += [(raw, None, _NO_FLAGS) for raw in outside]
    entries += [(raw, None, _IN_REASONING) for raw in inside]
    cache = repaired if len(entries) > 1 else None
    for raw, ident, flags in entries:
        if raw.flags:
            flags |= raw.flags
        quick = _valid_as_written(raw, specs, flags)
        if quick is not None:
            candidate, resolved = quick, quick.name
        else:
            candidate, resolved = _evaluate(raw, specs, repair, finish_reason, flags, cache)
        candidates.append(candidate)
        if candidate.accepted and resolved is not None and candidate.arguments is not None:
            calls.append(_to_call(candidate, resolved, specs[resolved].parameters, ident, len(calls), used_ids))

    return _built(calls, content, reasoning, candidates)


def _built(calls: Sequence[ToolCall], content: str, reasoning: str, candidates: Sequence[Candidate]) -> ParseOutcome:
    """The outcome of these calls and candidates: the deepest stage of a call, and the outcome's flags."""
    deepest = 0
    in_reasoning = False
    for call in calls:
        rank = _STAGE_RANK[call.stage]
        if rank > deepest:
            deepest = rank
        if FLAG_IN_REASONING in call.flags:
            in_reasoning = True
    flags = _NO_CALL if not candidates else _IN_REASONING if in_reasoning else _NO_FLAGS
    return ParseOutcome(tuple(calls), content, reasoning, tuple(candidates), _STAGE_ORDER[deepest], flags)


def _check_repair(repair: RepairSpec) -> None:
    if isinstance(repair, str):
        levels: Iterable[Any] = (repair,)
    elif isinstance(repair, Mapping):
        levels = repair.values()
    else:
        raise ConfigError(f"repair must be 'bounded', 'lossless', 'none' or a mapping of tool to level, not {repair!r}")
    for level in levels:
        if level not in _LEVELS:
            raise ConfigError(f"unknown repair level {level!r}; use 'bounded', 'lossless' or 'none'")


def _find(view: str, specs: Mapping[str, ToolSpec], tool_format: str, markers: frozenset[str]) -> list[RawCall]:
    """Strict finders, then the fallback on what they left, in text order.

    As in the strict stage, an unreadable call cut off at the end (``[f(`` never closed) yields to a
    complete call the fallback reads inside it.
    """
    if view.isspace() or not view:
        return []
    doubled = doubled_braces(view) if view.lstrip().startswith("{{") else None
    if doubled is not None:
        found = _undoubled(view, doubled, specs)
        if found is not None:
            return [found]
    strict = find_strict(view, tool_format, for_view(markers, view))
    strict = [typed_call(raw, specs) if raw.format in XML_VALUE_FORMATS else raw for raw in strict]
    try:
        fallback = find_fallback(view, specs, exclude=[raw.span for raw in strict])
        for broken in [raw for raw in strict if raw.truncated and raw.decode_error is not None]:
            start, end = broken.span
            inner = find_fallback(view, specs, exclude=[(0, start), (end, len(view))])
            if any(raw.decode_error is None and not raw.truncated for raw in inner):
                strict.remove(broken)
                fallback.extend(inner)
    except (RecursionError, TimeoutError):
        fallback = []
    return sorted([*strict, *fallback], key=lambda raw: raw.span)


def _as_written(view: str, specs: Mapping[str, ToolSpec], tool_format: str, markers: frozenset[str]) -> list[RawCall]:
    """What the strict finders read whole, decoded with no tolerance: the calls of ``parse_tool_calls(tolerant=False)``
    (a call that could not be decoded or was cut off stays text too)."""
    if view.isspace() or not view:
        return []
    strict = find_strict(view, tool_format, for_view(markers, view))
    typed = [typed_call(raw, specs) if raw.format in XML_VALUE_FORMATS else raw for raw in strict]
    return [raw for raw in typed if not raw.lenient and raw.decode_error is None and not raw.truncated]


def _undoubled(view: str, inner: tuple[int, int], specs: Mapping[str, ToolSpec]) -> RawCall | None:
    """The call a whole text in doubled braces holds, when the object inside is exactly one call.

    The call's span covers the outer braces too, and ``doubled_braces`` joins its tolerances.
    """
    start, end = inner
    try:
        found = find_fallback(view, specs, exclude=[(0, start), (end, len(view))])
    except (RecursionError, TimeoutError):
        return None
    if len(found) != 1 or found[0].span != inner or found[0].decode_error is not None or found[0].truncated:
        return None
    raw = found[0]
    outer = (view.index("{"), len(view.rstrip()))
    return RawCall(
        outer, view[outer[0] : outer[1]], f"{FIX_DOUBLED_BRACES}:{raw.format}", raw.stage, raw.name, raw.arguments,
        raw.arguments_text, raw.decode_error, raw.truncated, (*raw.lenient, FIX_DOUBLED_BRACES), raw.flags,
        raw.unearned,
    )  # fmt: skip


def _level_for(name: str | None, specs: Mapping[str, ToolSpec], repair: RepairSpec | None) -> RepairLevel:
    """The repair level of a call to ``name``: the caller's for every tool, else the tool's own.

    A name as written that is not declared takes the level of the tool it resolves to; one that resolves to
    none gets ``lossless`` (it is rejected as unknown anyway).
    """
    if isinstance(repair, str):
        return repair
    spec = specs.get(name) if name is not None else None
    if spec is None and name:
        resolved, _ = resolve_name(name, specs, level="bounded")
        spec = specs.get(resolved) if resolved is not None else None
    if spec is None:
        return "lossless"
    if repair is not None:
        return repair.get(spec.name, spec.repair)
    return spec.repair


def _fix_kind(fix: str) -> str:
    """The ``Repair.kind`` a tolerance is recorded as: its own name, ``wrapper`` or ``json``."""
    if fix in _OWN_KIND_FIXES:
        return fix
    return "wrapper" if fix in _WRAPPER_FIXES else "json"


def _valid_as_written(raw: RawCall, specs: Mapping[str, ToolSpec], flags: frozenset[str]) -> Candidate | None:
    """The accepted candidate of a call that needed no tolerance and is valid as written, else ``None``.

    This is what :func:`_evaluate` concludes for such a call (``repair_call`` returns it unchanged after
    its compiled check), without building the intermediate results.
    """
    if (
        raw.lenient
        or raw.truncated
        or raw.decode_error is not None
        or raw.unearned is not None
        or type(raw.arguments) is not dict
    ):
        return None
    spec = specs.get(raw.name) if raw.name is not None else None
    if spec is None or spec.name != raw.name:
        return None
    try:
        check = fast_check(spec.parameters)
        if check is None or not check(raw.arguments):
            return None
    except RecursionError:
        return None
    bucket: Bucket = "ok_strict" if raw.stage != "fallback" else "ok_fallback"
    return Candidate(raw.raw, raw.span, raw.format, raw.stage, bucket, raw.name, raw.arguments, (), None, flags)


def _evaluate(
    raw: RawCall,
    specs: Mapping[str, ToolSpec],
    repair: RepairSpec | None,
    finish_reason: str | None,
    flags: frozenset[str],
    cache: dict[tuple[str | None, str, str], RepairResult] | None,
) -> tuple[Candidate, str | None]:
    """Bucket one RawCall; also return the declared name it resolved to when accepted."""
    tolerances = tuple(Repair(_fix_kind(fix), "", fix, None) for fix in raw.lenient) if raw.lenient else ()
    found_stage: Stage = "fallback" if raw.lenient else raw.stage
    args = raw.arguments if isinstance(raw.arguments, dict) else None
    if raw.unearned is not None:
        return _rejected(raw, flags, found_stage, "Ambiguous", args, tolerances, raw.unearned)
    if raw.truncated and (finish_reason == "length" or raw.decode_error is not None or _cut_off(raw)):
        why = "the output ended (finish_reason=length)" if finish_reason == "length" else "the output ended"
        return _rejected(
            raw,
            flags,
            found_stage,
            "Truncated",
            args,
            tolerances,
            f"{why} inside this tool call; it was cut off. Raise max_tokens or shorten the reasoning, "
            "then send the whole call again.",
        )
    if raw.decode_error is not None:
        return _rejected(
            raw,
            flags,
            found_stage,
            "InvalidJson",
            None,
            tolerances,
            f"the arguments of {raw.name or 'this call'} could not be read ({raw.decode_error}); "
            "send the arguments as one JSON object.",
        )
    level = _level_for(raw.name, specs, repair)
    try:
        if cache is None:
            result = repair_call(raw.name, raw.arguments, specs, level=level)
        else:
            key = (raw.name, level, repr(raw.arguments))
            hit = cache.get(key)
            if hit is None:
                hit = cache[key] = repair_call(raw.name, raw.arguments, specs, level=level)
            result = hit
    except RecursionError:
        return _rejected(
            raw,
            flags,
            found_stage,
            "SchemaMismatch",
            None,
            tolerances,
            f"the arguments of {raw.name or 'this call'} are nested too deeply to check; send a flatter object.",
        )
    if not result.ok:
        return _rejected(
            raw,
            flags,
            found_stage,
            result.bucket or "SchemaMismatch",
            result.arguments if result.arguments is not None else args,
            tolerances + result.repairs,
            result.error,
        )
    stage: Stage
    bucket: Bucket
    if result.repairs:
        bucket, stage = "repaired", "repair"
    elif found_stage in ("strict", "native"):
        bucket, stage = "ok_strict", found_stage
    else:
        bucket, stage = "ok_fallback", found_stage
    candidate = Candidate(
        raw.raw, raw.span, raw.format, stage, bucket, raw.name, result.arguments, tolerances + result.repairs, None,
        flags,
    )  # fmt: skip
    return candidate, result.name


def _cut_off(raw: RawCall) -> bool:
    """True when the arguments were cut off, beyond the one missing final closer that is tolerated."""
    if FIX_INCOMPLETE not in raw.lenient:
        return False
    text = (raw.arguments_text or "").strip()
    unclosed = unclosed_brackets(text)
    if not text.startswith(("{", "[")) or unclosed is None or len(unclosed) != 1 or text.endswith((",", ":")):
        return True
    # Only the final closer is missing when adding it reads the whole text with no other tolerance.
    try:
        closed = loads_lenient(text + ("}" if unclosed == "{" else "]"))
    except LenientJSONError:
        return True
    return not (closed.complete and set(closed.fixes) <= set(raw.lenient))


def _rejected(
    raw: RawCall,
    flags: frozenset[str],
    stage: Stage,
    bucket: Bucket,
    arguments: dict[str, Any] | None,
    repairs: tuple[Repair, ...],
    error: str | None,
) -> tuple[Candidate, None]:
    return Candidate(raw.raw, raw.span, raw.format, stage, bucket, raw.name, arguments, repairs, error, flags), None


def _to_call(
    candidate: Candidate, name: str, schema: Mapping[str, Any], ident: str | None, index: int, used_ids: set[str]
) -> ToolCall:
    if ident is None:
        n = index
        while f"call_{n}" in used_ids:
            n += 1
        ident = f"call_{n}"
        used_ids.add(ident)
    assert candidate.arguments is not None
    return ToolCall(
        name=name,
        arguments=candidate.arguments,
        bucket=candidate.bucket,
        stage=candidate.stage,
        flags=candidate.flags,
        repairs=candidate.repairs,
        id=ident,
        format=candidate.format,
        checked=stamp(schema, candidate.arguments),
    )


def _content(text: str, content_spans: Sequence[tuple[int, int]], removed: Sequence[tuple[int, int]]) -> str:
    """The content segments minus every call-like span, joined and stripped."""
    cuts = sorted(s for s in removed if s[0] >= 0)
    pieces: list[str] = []
    i = 0
    for start, end in content_spans:
        pos = start
        while i < len(cuts) and cuts[i][1] <= pos:
            i += 1
        j = i
        while j < len(cuts) and cuts[j][0] < end:
            cut_start, cut_end = cuts[j]
            if cut_start > pos:
                pieces.append(text[pos:cut_start])
            pos = max(pos, cut_end)
            j += 1
        if pos < end:
            pieces.append(text[pos:end])
    return "".join(pieces).strip()
