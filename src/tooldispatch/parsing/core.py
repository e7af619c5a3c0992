"""``parse_tool_calls``: the cascade from raw model output to valid tool calls.

reasoning split → strict formats on the content → the server's native calls → fallback on what strict
left → (only when nothing call-like is outside the reasoning) strict + fallback on the reasoning →
schema-guided repair and validation of every candidate → one bucket per candidate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from tooldispatch.errors import ConfigError
from tooldispatch.parsing._markers import SHORT, contains, contains_any, for_view, scan_markers
from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.fallback import FIX_TAG, find_fallback
from tooldispatch.parsing.formats import find_strict
from tooldispatch.parsing.formats._common import (
    FIX_ARGUMENTS_STRING,
    FIX_FENCE,
    FIX_INCOMPLETE,
    FIX_UNCLOSED,
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    is_schema_echo,
    tool_call_body_kind,
    unclosed_brackets,
)
from tooldispatch.parsing.formats.hermes import ANCHORS, Known, find_only_tool_call_tags, tool_call_blocks
from tooldispatch.parsing.formats.llama import read_whole_json_call
from tooldispatch.parsing.lane import AS_STRING, strict_outcome
from tooldispatch.parsing.lenient import LenientJSONError, forget_strict, loads_lenient
from tooldispatch.parsing.native import read_native_calls
from tooldispatch.parsing.reasoning import split_reasoning
from tooldispatch.repair import RepairResult, repair_call, resolve_name
from tooldispatch.repair.validate import fast_check
from tooldispatch.toolspec import ToolsInput, ToolSpec, normalize_tools
from tooldispatch.types import (
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
)

_LEVELS: Final[frozenset[str]] = frozenset({"bounded", "lossless", "none"})
_STAGE_ORDER: Final[tuple[Stage, ...]] = ("none", "native", "strict", "fallback", "repair")
_STAGE_RANK: Final[dict[str, int]] = {stage: rank for rank, stage in enumerate(_STAGE_ORDER)}
_NO_FLAGS: Final[frozenset[str]] = frozenset()
_NO_CALL: Final = frozenset({FLAG_NO_CALL})
_IN_REASONING: Final = frozenset({FLAG_IN_REASONING})
_WRAPPER_FIXES: Final = frozenset({FIX_UNCLOSED, FIX_FENCE, FIX_TAG})
_TAG_ONLY_FORMATS: Final = frozenset({"auto", "hermes", "qwen", "hermes_list"})
_JSON_FORMATS: Final = frozenset({"auto", "llama3_json", "llama3", "json"})
_REASONING_OR_TOKENS: Final = ("<|", "<｜", "think>", "THINK]")
_STRING_FIX: Final = (FIX_ARGUMENTS_STRING,)  # the tolerance of arguments written as a JSON string


def parse_tool_calls(
    text: object,
    tools: ToolsInput,
    *,
    native_calls: Sequence[Any] | None = None,
    finish_reason: str | None = None,
    tool_format: str = "auto",
    reasoning_open: bool = False,
    repair: RepairSpec = "bounded",
) -> ParseOutcome:
    """Turn one raw model output into tool calls, content and reasoning.

    Args:
        text: the raw output as a str (content as the model wrote it, reasoning markers included); ``None``
            reads as empty. It is typed ``object`` so that any other value gets the ``TypeError`` below, in the
            compiled build too.
        tools: the OpenAI tools list, bare function dicts, or ``{name: ToolSpec}``.
        native_calls: the OpenAI ``tool_calls`` list a server already extracted; their ``arguments``
            strings are decoded leniently and repaired like everything else.
        finish_reason: the server's finish reason; ``"length"`` turns a call cut off at the end into a
            ``Truncated`` candidate instead of a malformed one.
        tool_format: ``"auto"`` (run every format whose markers appear) or one name of
            ``tooldispatch.parsing.formats.FORMATS`` (``hermes``, ``mistral``, ``harmony``, ...).
        reasoning_open: the prompt already opened a reasoning block (``<think>``), so the output starts
            inside it.
        repair: ``"bounded"``, ``"lossless"`` or ``"none"``, or a mapping from tool name to level (tools
            not in it get ``"bounded"``).

    Returns:
        The calls, content, reasoning, every candidate with its bucket, the deepest stage needed and
        the ``no_call``/``in_reasoning`` flags. Lenient decoding and tag tolerances appear in a call's
        ``repairs`` as ``Repair(kind="json" | "wrapper", path="", before=<tolerance name>, after=None)``.

    Raises:
        ConfigError: the tools, ``tool_format`` or ``repair`` are invalid (never because of the text).
        TypeError: ``text`` is not a str (or ``None``).
    """
    return _parse(text, tools, native_calls, finish_reason, tool_format, reasoning_open, repair, None, True)


def _parse(
    text: object,
    tools: ToolsInput,
    native_calls: Sequence[Any] | None,
    finish_reason: str | None,
    tool_format: str,
    reasoning_open: bool,
    repair: RepairSpec,
    known: Known | None,
    shapes: bool,
) -> ParseOutcome:
    """:func:`parse_tool_calls`; ``known``: ``<tool_call>`` blocks already read (see ``hermes.Known``).

    ``shapes``: try the strict lane and the common shapes first; a caller that knows the text cannot be one
    of them (see :func:`parse_from_blocks`) skips both.
    """
    forget_strict()  # each parse starts without the strict results of another (a store: this runs per parse)
    if type(repair) is not str or repair not in _LEVELS:
        _check_repair(repair)
    if shapes and not native_calls and tool_format in _TAG_ONLY_FORMATS and type(text) is str:
        # The strict lane looks names up itself (a value that is not a ToolSpec sends the text on).
        lookup = tools if type(tools) is dict else normalize_tools(tools)
        quick = strict_outcome(text, lookup, tool_format == "auto", reasoning_open)
        if quick is not None:
            return quick
        specs = lookup if lookup is not tools else normalize_tools(tools)
    else:
        specs = normalize_tools(tools)
    if text is None:
        text = ""
    elif not isinstance(text, str):
        raise TypeError(f"text must be the model's output as a str, not {type(text).__name__}; decode bytes first")
    natives: list[tuple[RawCall, str | None]] = []
    inside: list[RawCall] = []
    fast = None if native_calls or not shapes else _find_common(text, tool_format, reasoning_open)
    if fast is not None:
        outside, inside, content, reasoning = fast
    else:
        markers = scan_markers(text)
        split = split_reasoning(text, reasoning_open=reasoning_open, markers=markers)
        content_view = split.view("content")

        natives = read_native_calls(native_calls or ())
        outside = _find(content_view, specs, tool_format, markers, known)
        removed = [raw.span for raw in outside]
        if natives:
            # A server that extracted calls may also leave them in the text: count each once.
            native_keys = {_key(raw.name, raw.arguments) for raw, _ in natives}
            outside = [raw for raw in outside if raw.name is None or _key(raw.name, raw.arguments) not in native_keys]
        if not natives and not outside and split.has_reasoning:
            inside = _find(split.view("reasoning"), specs, tool_format, markers, known)
        content = _content(text, split.spans("content"), removed)
        reasoning = split.reasoning

    return _outcome(natives, outside, inside, content, reasoning, specs, repair, finish_reason)


def _outcome(
    natives: Sequence[tuple[RawCall, str | None]],
    outside: Sequence[RawCall],
    inside: Sequence[RawCall],
    content: str,
    reasoning: str,
    specs: Mapping[str, ToolSpec],
    repair: RepairSpec,
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
            calls.append(_to_call(candidate, resolved, ident, len(calls), used_ids))

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


def parse_block(
    text: str, specs: Mapping[str, ToolSpec], *, tool_format: str, repair: RepairSpec
) -> tuple[ParseOutcome, bool]:
    """``parse_tool_calls(text, specs, tool_format=..., repair=...)``, and whether it read plain hermes blocks.

    The flag is true when the outcome came from closed ``<tool_call>`` blocks in plain text (the shape
    :func:`~tooldispatch.parsing.formats.hermes.find_only_tool_call_tags` reads); :func:`assemble_blocks`
    accepts such outcomes as parts of a longer text.
    """
    forget_strict()  # each parse starts without the strict results of another (a store: this runs per parse)
    if tool_format in _TAG_ONLY_FORMATS and not contains(text, "think>"):
        _check_repair(repair)
        if TOOL_CALL_OPEN in text:
            # With a block in the text, the strict lane answers only by reading hermes blocks in plain text.
            lookup = specs if type(specs) is dict else dict(specs)
            quick = strict_outcome(text, lookup, tool_format == "auto")
            if quick is not None:
                return quick, True
            found = find_only_tool_call_tags(text)
        elif ANCHORS.search(text) is None:
            found = find_only_tool_call_tags(text)  # prose alone may still be that shape
        else:
            found = None  # no block, and something another stage reads: not that shape
        if found is not None:
            return _outcome((), found[0], (), found[1], "", specs, repair, None), True
    return _parse(text, specs, None, None, tool_format, False, repair, None, True), False


def assemble_blocks(
    text: str,
    blocks: Mapping[str, ParseOutcome],
    *,
    tool_format: str,
    reasoning_open: bool,
    finish_reason: str | None,
) -> ParseOutcome | None:
    """The outcome of ``parse_tool_calls(text, ...)`` built from outcomes of its blocks, else ``None``.

    Args:
        text: the whole output.
        blocks: a block's text → its outcome from :func:`parse_block` with the same tools and options
            (only outcomes whose flag was true).
        tool_format: as for ``parse_tool_calls``.
        reasoning_open: as for ``parse_tool_calls``.
        finish_reason: as for ``parse_tool_calls``.

    Returns:
        The outcome, equal to the whole-text parse, when ``text`` is closed ``<tool_call>`` blocks in plain
        text (the shape the cascade reads without its generic stages) and every block is in ``blocks``:
        each call is then decoded, repaired and validated on its own, exactly as in the block's outcome,
        so only the offsets, the call ids and the content change. ``None`` otherwise (parse the text).
    """
    if (
        tool_format not in _TAG_ONLY_FORMATS
        or reasoning_open
        or finish_reason == "length"  # the only option a block's outcome was not computed with
        or contains(text, "think>")
    ):
        return None
    shape = tool_call_blocks(text)
    if shape is None:
        return None
    found, content = shape
    candidates: list[Candidate] = []
    calls: list[ToolCall] = []
    for begin, _, _, end in found:
        part = blocks.get(text[begin:end])
        if part is None:
            return None
        for c in part.candidates:
            start, stop = c.span
            candidates.append(
                Candidate(
                    c.raw, (start + begin, stop + begin), c.format, c.stage, c.bucket, c.name, c.arguments,
                    c.repairs, c.error, c.flags,
                )
            )  # fmt: skip
        for call in part.calls:
            calls.append(
                ToolCall(
                    call.name, call.arguments, call.bucket, call.stage, call.flags, call.repairs,
                    f"call_{len(calls)}", call.format,
                )
            )  # fmt: skip
    return _built(calls, content, "", candidates)


def parse_from_blocks(
    text: str,
    specs: Mapping[str, ToolSpec],
    blocks: Mapping[str, ParseOutcome],
    *,
    tool_format: str,
    reasoning_open: bool,
    finish_reason: str | None,
    repair: RepairSpec,
    thinks: int = 0,
) -> ParseOutcome:
    """``parse_tool_calls(text, specs, ...)`` for a text some of whose ``<tool_call>`` blocks were read alone.

    Args:
        text: the whole output.
        specs: the declared tools.
        blocks: a block's text → its outcome from :func:`parse_block` with the same tools and options (only
            outcomes whose flag was true).
        tool_format: as for ``parse_tool_calls``.
        reasoning_open: as for ``parse_tool_calls``.
        finish_reason: as for ``parse_tool_calls``.
        repair: as for ``parse_tool_calls``.
        thinks: how many ``<think>`` tags the caller saw in ``text`` (a lower bound). The strict lane and the
            common shapes read at most one think block, and a text with two ``<think>`` tags is neither (a
            test checks both refuse it), so from two on they are not tried.

    Returns:
        The outcome of ``parse_tool_calls``: built from the blocks' outcomes when the text is only such blocks
        in plain text (:func:`assemble_blocks`), else parsed with every block whose calls were accepted as
        written (:func:`_as_read`) taken as read instead of decoded again.
    """
    assembled = assemble_blocks(
        text, blocks, tool_format=tool_format, reasoning_open=reasoning_open, finish_reason=finish_reason
    )
    if assembled is not None:
        return assembled
    known: dict[str, list[RawCall]] = {}
    for block, part in blocks.items():
        calls = _as_read(block, part)
        if calls is not None:
            known[block] = calls
    return _parse(text, specs, None, finish_reason, tool_format, reasoning_open, repair, known or None, thinks < 2)


def _as_read(block: str, part: ParseOutcome) -> list[RawCall] | None:
    """The calls ``hermes.read_block`` reads in ``block``, a closed ``<tool_call>`` block at offset 0, from its outcome.

    Only an outcome whose every call was accepted as written (or with its arguments written as a JSON string,
    the one tolerance the strict lane takes) tells them: its calls are the ones read, unchanged. ``None``
    otherwise, and for a body the hermes reader does not own (the finders take a known block before asking
    who owns its body).
    """
    if not part.candidates or not block.startswith(TOOL_CALL_OPEN) or not block.endswith(TOOL_CALL_CLOSE):
        return None
    if tool_call_body_kind(block, len(TOOL_CALL_OPEN), len(block) - len(TOOL_CALL_CLOSE)) != "hermes":
        return None  # a body another format owns is read by it
    body = block[len(TOOL_CALL_OPEN) : len(block) - len(TOOL_CALL_CLOSE)]
    span = (0, len(block))
    calls: list[RawCall] = []
    for c in part.candidates:
        if c.format != "hermes" or c.span != span or c.error is not None or c.flags or c.name is None:
            return None
        if c.bucket == "ok_strict" and not c.repairs:
            calls.append(RawCall(span, block, "hermes", "strict", c.name, c.arguments, body))
        elif c.bucket == "ok_fallback" and c.repairs == AS_STRING:
            calls.append(RawCall(span, block, "hermes", "fallback", c.name, c.arguments, body, lenient=_STRING_FIX))
        else:
            return None
    return calls


def _find_common(
    text: str, tool_format: str, reasoning_open: bool
) -> tuple[list[RawCall], list[RawCall], str, str] | None:
    """The calls outside and inside the reasoning, the content and the reasoning of a common shape, else ``None``.

    The shapes: hermes blocks in plain text (or plain text alone), optionally after one leading
    ``<think>`` block (whose blocks count when there are none outside it), or one bare Llama 3 JSON
    output. Each is what the full cascade finds for it (a test compares them), without the marker
    scan, the reasoning split and the fallback scan, which find nothing more there.
    """
    if tool_format in _JSON_FORMATS and not reasoning_open and text.lstrip().startswith("{"):
        if contains_any(text, _REASONING_OR_TOKENS):
            return None
        # Lenient JSON, several calls, trailing prose or another shape: the cascade reads it (one read, not two).
        calls = read_whole_json_call(text)
        if not calls or any(is_schema_echo(raw.arguments) for raw in calls):
            return None
        return calls, [], "", ""
    if tool_format not in _TAG_ONLY_FORMATS:
        return None
    if not ("think>" in text if len(text) < SHORT else contains(text, "think>")):
        if reasoning_open:
            return None
        found = find_only_tool_call_tags(text)
        return None if found is None else (found[0], [], found[1], "")
    block = _leading_think(text)
    if block is None:
        return None
    start, body, close = block
    reasoning = text[body:close].strip()
    if reasoning_open and not reasoning:
        # A prompt-opened block closed at once leaves no reasoning segment: the cascade decides that.
        return None
    found = find_only_tool_call_tags(text, start)
    if found is None:
        return None
    if found[0] or not reasoning:
        return found[0], [], found[1], reasoning
    # Nothing outside the reasoning: the cascade looks for calls inside it.
    inner = find_only_tool_call_tags(text, body, close)
    return None if inner is None else ([], inner[0], found[1], reasoning)


def _leading_think(text: str) -> tuple[int, int, int] | None:
    """Where the content starts, and the reasoning's bounds, for one ``<think>…</think>`` (or ``…</think>``) lead."""
    close = text.find("</think>")
    if close < 0:
        return None
    opener = text.find("<think>")
    if opener >= 0 and (opener > close or text[:opener].strip()):
        return None
    if text.count("think>") != (1 if opener < 0 else 2):
        return None
    body = 0 if opener < 0 else opener + len("<think>")
    return close + len("</think>"), body, close


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


def _find(
    view: str, specs: Mapping[str, ToolSpec], tool_format: str, markers: frozenset[str], known: Known | None = None
) -> list[RawCall]:
    """Strict finders, then the fallback on what they left, in text order.

    As in the strict stage, an unreadable call cut off at the end (``[f(`` never closed) yields to a
    complete call the fallback reads inside it.
    """
    if view.isspace() or not view:
        return []
    strict = find_strict(view, tool_format, for_view(markers, view), known)
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


def _key(name: str | None, arguments: Any) -> str:
    try:
        return f"{name}\x00{arguments!r}"
    except RecursionError:
        return f"{name}\x00{id(arguments)}"


def _level_for(name: str | None, specs: Mapping[str, ToolSpec], repair: RepairSpec) -> RepairLevel:
    if isinstance(repair, str):
        return repair
    if not name:
        return "bounded"
    if name in repair:
        return repair[name]
    resolved, _ = resolve_name(name, specs, level="bounded")
    return repair.get(resolved, "bounded") if resolved is not None else "bounded"


def _valid_as_written(raw: RawCall, specs: Mapping[str, ToolSpec], flags: frozenset[str]) -> Candidate | None:
    """The accepted candidate of a call that needed no tolerance and is valid as written, else ``None``.

    This is what :func:`_evaluate` concludes for such a call (``repair_call`` returns it unchanged after
    its compiled check), without building the intermediate results.
    """
    if raw.lenient or raw.truncated or raw.decode_error is not None or type(raw.arguments) is not dict:
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
    repair: RepairSpec,
    finish_reason: str | None,
    flags: frozenset[str],
    cache: dict[tuple[str | None, str, str], RepairResult] | None,
) -> tuple[Candidate, str | None]:
    """Bucket one RawCall; also return the declared name it resolved to when accepted."""
    tolerances = (
        tuple(Repair("wrapper" if fix in _WRAPPER_FIXES else "json", "", fix, None) for fix in raw.lenient)
        if raw.lenient
        else ()
    )
    found_stage: Stage = "fallback" if raw.lenient else raw.stage
    args = raw.arguments if isinstance(raw.arguments, dict) else None
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


def _to_call(candidate: Candidate, name: str, ident: str | None, index: int, used_ids: set[str]) -> ToolCall:
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
