"""The repeat guard: a turn whose calls only repeat calls already answered is generated again without tools.

Small models often call the same tool again, with the same arguments, after its result is already in the
conversation, until the client's turn limit ends the run, although the answer is right there. With the guard on
(the default; ``tooldispatch proxy --no-repeat-guard`` turns it off), a turn is checked against the calls of the
conversation since the user's last message whose results came back (a ``tool`` message answering the call's id):
when every call the turn makes is one of those (same name, same arguments once canonical: keys sorted, the JSON
as decoded), the calls are not passed on. The turn is generated once more with calls disabled (``tool_choice:
none``: no tools in the prompt and no call extracted), and that answer goes out, marked: the
``x-tooldispatch-repeat-guard`` header on a whole answer, a ``tooldispatch.repeat_guard`` field on the answer (the
last chunk of a stream), and the ``repeat_guard`` flag in the statistics. A turn with one new call among repeats
is passed on whole.

A tool whose result may change (a status poll) is exactly what the guard would stop from being asked twice in
one user turn. A policy file declares such tools (``polling = true``), and their calls are never held; a tool the
policy does not declare is assumed not to be polled.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final

from tooldispatch.proxy.translate import ProxyRequest
from tooldispatch.types import ToolCall, call_key

HEADER: Final = "x-tooldispatch-repeat-guard"
FLAG: Final = "repeat_guard"


def answered_calls(messages: Sequence[Mapping[str, Any]], polling: frozenset[str] = frozenset()) -> frozenset[str]:
    """The keys of the calls made since the user's last message whose results are in the conversation.

    Calls to ``polling`` tools are left out: their identical calls may be answered differently, so none repeats.
    """
    start = 0
    for position, message in enumerate(messages):
        if message.get("role") == "user":
            start = position + 1
    pending: dict[str, str] = {}
    done: set[str] = set()
    for message in messages[start:]:
        role = message.get("role")
        if role == "assistant":
            for call in message.get("tool_calls") or ():
                fn = call.get("function") if isinstance(call, Mapping) else None
                if isinstance(fn, Mapping) and isinstance(fn.get("name"), str) and fn["name"] not in polling:
                    pending[str(call.get("id"))] = call_key(fn["name"], fn.get("arguments") or {})
        elif role == "tool":
            key = pending.get(str(message.get("tool_call_id")))
            if key is not None:
                done.add(key)
    return frozenset(done)


def applies(request: ProxyRequest) -> bool:
    """Whether the guard may hold this request's calls: only under ``tool_choice: auto``.

    ``required`` or a tool's name asks for a call on every turn (smolagents' tool-calling agent sends ``required``
    and ends its run with its own ``final_answer`` tool), so an answer without calls would break the client's loop,
    as the agent's guard also leaves such turns alone.
    """
    return request.parses and request.tool_choice == "auto"


def only_repeats(calls: Iterable[ToolCall], done: frozenset[str]) -> bool:
    """Whether there are calls and every one of them repeats an answered call."""
    keys = [call_key(c.name, c.arguments) for c in calls]
    return bool(keys) and all(k in done for k in keys)


def without_calls(request: ProxyRequest) -> ProxyRequest:
    """The same request with calls disabled (``tool_choice: none``): the turn generated once more."""
    chat = replace(request.chat, tool_choice="none", constrained=False)
    return replace(request, tool_choice="none", chat=chat)


def mark(repeated: Sequence[ToolCall]) -> dict[str, Any]:
    """The field that marks a guarded answer: which calls were repeats."""
    return {"repeat_guard": {"repeated": [{"name": c.name, "arguments": c.arguments} for c in repeated]}}
