"""What the model is told when a call it wrote could not be used.

A call that names a declared tool but fails its schema goes back the way the model's own template expects a
tool's answer: the call stays in the assistant turn (as the model wrote it) and a ``tool`` message answers it
with the dispatcher's error shape (``error``, ``tool``, ``message``, ``recoverable``, ``suggestion``). The
message names the tool's arguments exactly and the undeclared ones to leave out; when leaving them out is all
that is wrong, ``corrected_call`` spells out the call without them. It is only shown: nothing runs on the
model's behalf, and the model must send the call itself. Output that names no declared tool (bad JSON, an
unknown name, a cut-off call) has no call to answer, so it gets a short user turn instead.

``Agent(feedback="bare")`` keeps only the error itself, to measure what the rest is worth: a refused call gets
its error kind, tool and the validator's message; a dispatcher's refusal or failure its kind, tool and message;
a replayed call its stored result alone. No signature, suggestion, corrected call or note is added.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from tooldispatch.dispatch import DispatchResult
from tooldispatch.repair.validate import schema_errors
from tooldispatch.toolspec import ToolSpec
from tooldispatch.types import Candidate, ParseOutcome, Repair, ToolCall, call_key

FEEDBACK_STYLES: Final = ("full", "bare")
"""The values of ``Agent(feedback=...)``: everything this module writes, or the error alone."""

_BARE_KEYS: Final = ("error", "status", "tool", "message")


def bare(payload: Mapping[str, Any]) -> dict[str, Any]:
    """An error or status answer reduced to its kind, tool and message (``feedback="bare"``)."""
    return {key: payload[key] for key in _BARE_KEYS if key in payload}


REPEAT_NOTE = (
    "This is the same call you sent last turn, refused for the same reason: change it as the message says "
    "instead of sending it again."
)
"""Added when a refused call is identical to one refused the turn before."""


DROPPED_FLAG = "dropped_extra_arguments"
"""The flag of a call run with its undeclared argument keys dropped (``Agent(drop_extra_arguments=True)``)."""


def answerable(cand: Candidate, tools: Mapping[str, ToolSpec]) -> bool:
    """A call refused for its arguments only (it names a declared tool, whole and decoded): answered as a call."""
    return cand.bucket == "SchemaMismatch" and cand.name in tools and isinstance(cand.arguments, dict)


def without_extra_arguments(cand: Candidate, tool: ToolSpec, call_id: str) -> ToolCall | None:
    """The refused call with its undeclared keys dropped, when that alone makes it valid; else ``None``.

    Each dropped key is recorded as a ``Repair("drop_key", "/<key>", value, None)`` and the call carries
    ``DROPPED_FLAG``, so traces and summaries show what ran in place of what the model wrote.
    """
    args = cand.arguments if isinstance(cand.arguments, dict) else {}
    fixed = corrected_arguments(args, tool)
    if fixed is None:
        return None
    dropped = tuple(Repair("drop_key", f"/{key}", args[key], None) for key in undeclared_keys(args, tool))
    return ToolCall(
        tool.name,
        fixed,
        bucket="repaired",
        stage=cand.stage,
        flags=cand.flags | {DROPPED_FLAG},
        repairs=(*cand.repairs, *dropped),
        id=call_id,
        format=cand.format,
    )


REPLAY_NOTE = "this exact call already ran earlier in this run; nothing was done again. Its result:"
"""What a replayed side-effecting call's answer says before the stored result."""


def tool_answer(result: DispatchResult, *, bare_feedback: bool = False) -> str:
    """The ``tool`` message content for a dispatched call.

    A side-effecting call the dispatcher answered from its idempotency store (``idempotent_replay``) says so:
    its stored result alone reads exactly like a first success, and a small model then sends the call again
    and again. Every other result is passed as the dispatcher wrote it. With ``bare_feedback`` a replay is its
    stored result alone, and a call that did not succeed gets its error's kind, tool and message only.
    """
    if bare_feedback:
        return result.content if result.ok else _bare_content(result.content)
    if result.reason != "idempotent_replay":
        return result.content
    try:
        stored: Any = json.loads(result.content)
    except ValueError:
        stored = result.content
    return json.dumps({"already_done": True, "note": REPLAY_NOTE, "result": stored}, ensure_ascii=False)


def _bare_content(content: str) -> str:
    try:
        value: Any = json.loads(content)
    except ValueError:
        return content
    return json.dumps(bare(value), ensure_ascii=False) if isinstance(value, dict) else content


REPEATED_SUCCESS_NOTE = (
    "you made this same call, with the same arguments, in turn {turn}, and it succeeded; if the results you have "
    "answer the question, call final_answer with the answer now. Its result:"
)
"""What a repeated successful call's answer says before its result, with the answer tool on."""


def repeated_call_answer(result: DispatchResult, turn: int) -> str:
    """The ``tool`` message content for a successful call that repeats one already answered in ``turn`` (1-based)."""
    try:
        value: Any = json.loads(result.content)
    except ValueError:
        value = result.content
    return json.dumps({"note": REPEATED_SUCCESS_NOTE.format(turn=turn), "result": value}, ensure_ascii=False)


EARLY_ANSWER = {
    "error": "answer_before_results",
    "tool": "final_answer",
    "message": "this answer came after other calls in the same turn, before any tool call of this run had "
    "succeeded, so it rests on no result; the results of those calls are in the messages above",
    "recoverable": True,
    "attempts": 0,
    "retried": False,
    "suggestion": "read the results, then call final_answer with the answer they give",
}
"""What a ``final_answer`` gets back when it came after other calls in its turn before any call had succeeded."""


def undeclared_keys(arguments: Mapping[str, Any], tool: ToolSpec) -> list[str]:
    """Top-level argument keys the tool does not declare, in the order the model wrote them."""
    props = tool.properties
    if not props or tool.parameters.get("additionalProperties", True) is not False:
        return []
    return [key for key in arguments if key not in props]


def corrected_arguments(arguments: Mapping[str, Any], tool: ToolSpec) -> dict[str, Any] | None:
    """The arguments without their undeclared keys, when that alone makes them valid; otherwise ``None``."""
    extra = undeclared_keys(arguments, tool)
    if not extra:
        return None
    kept = {k: v for k, v in arguments.items() if k not in extra}
    return kept if not schema_errors(kept, tool.parameters, tool=tool.name) else None


def _signature(tool: ToolSpec) -> str:
    props = list(tool.properties)
    required = [p for p in props if p in tool.required]
    optional = [p for p in props if p not in tool.required]
    text = f"{tool.name} takes exactly these arguments: {', '.join(required) or 'none required'}"
    return text + (f" (optional: {', '.join(optional)})" if optional else "")


def rejection_payload(
    cand: Candidate, tool: ToolSpec, *, repeated: bool = False, bare_feedback: bool = False
) -> dict[str, Any]:
    """The error a refused call gets back, in the dispatcher's error shape.

    Args:
        cand: the rejected candidate (it names ``tool`` and has decoded arguments).
        tool: the declared tool.
        repeated: the same call was refused the turn before.
        bare_feedback: the error kind, the tool and the validator's message only.
    """
    if bare_feedback:
        message = cand.error or "the arguments do not match the tool's schema"
        return {"error": "invalid_arguments", "tool": tool.name, "message": message}
    args = cand.arguments if isinstance(cand.arguments, dict) else {}
    extra = undeclared_keys(args, tool)
    if extra:
        names = ", ".join(json.dumps(k) for k in extra)
        verb = "is not an argument" if len(extra) == 1 else "are not arguments"
        parts = [f"{names} {verb} of {tool.name}: leave {'it' if len(extra) == 1 else 'them'} out", _signature(tool)]
    else:
        parts = [cand.error or "the arguments do not match the tool's schema", _signature(tool)]
    if repeated:
        parts.append(REPEAT_NOTE)
    payload: dict[str, Any] = {
        "error": "invalid_arguments",
        "tool": tool.name,
        "message": ". ".join(p.rstrip(".") for p in parts) + ".",
        "recoverable": True,
        "attempts": 0,
        "retried": False,
        "suggestion": "fix the arguments as the message says and call it again",
    }
    fixed = corrected_arguments(args, tool)
    if fixed is not None:
        payload["suggestion"] = "send this call instead"
        payload["corrected_call"] = {"name": tool.name, "arguments": fixed}
    return payload


def repeated_rejection(cand: Candidate, previous: ParseOutcome | None) -> bool:
    """``cand`` is identical (name and arguments) to a call refused in ``previous``."""
    if previous is None or cand.name is None:
        return False
    return call_key(cand.name, cand.arguments) in {call_key(c.name, c.arguments) for c in previous.rejected}


def unusable_output_feedback(
    outcome: ParseOutcome, previous: ParseOutcome | None = None, *, bare_feedback: bool = False
) -> str:
    """A user turn for call attempts that name no declared tool or could not be decoded (with ``bare_feedback``,
    the errors alone)."""
    lines = ["Your tool call could not be used:"]
    for cand in outcome.rejected:
        name = f" {cand.name!r}" if cand.name else ""
        lines.append(f"- call{name} ({cand.bucket}): {cand.error or 'unusable'}")
        if repeated_rejection(cand, previous) and not bare_feedback:
            lines.append("  " + REPEAT_NOTE)
    if bare_feedback:
        return "\n".join(lines)
    lines.append("Reply with a corrected tool call, or answer in plain text if no tool is needed.")
    return "\n".join(lines)
