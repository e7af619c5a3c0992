"""OpenAI request bodies in, ``ChatRequest`` out; parse outcomes in, OpenAI answers out.

Pure functions of plain dicts, so every rule here is tested without a server. ``read_request`` checks what
the proxy must check before it asks the upstream anything (the tools, ``tool_choice``, the bounds) and says
exactly what is wrong in a 400; everything it does not handle itself is passed on to the upstream as sent.
"""

from __future__ import annotations

import json
import marshal
import re
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from tooldispatch.backends.base import OMIT, ChatRequest
from tooldispatch.backends.messages import MessageError, normalize_messages
from tooldispatch.errors import ConfigError, InvalidSchema
from tooldispatch.policy import ToolPolicy
from tooldispatch.proxy.errors import invalid
from tooldispatch.proxy.fields import check_fields
from tooldispatch.repair.validate import compiled
from tooldispatch.toolspec import ToolSpec, normalize_tools
from tooldispatch.types import ToolCall

# Names every prompt format can carry (OpenAI's own rule, plus the dots and colons MCP tool names use).
_NAME: Final = re.compile(r"[A-Za-z0-9_.:\-]{1,64}")
# Fields the proxy reads itself; every other field of the body goes to the upstream unchanged.
_HANDLED: Final = frozenset(
    {
        "model",
        "messages",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "stream",
        "stream_options",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "seed",
        "stop",
        "n",
    }
)
# A call's arguments as OpenAI writes them (``{"city": "Paris"}``); built once, as json.dumps with options builds
# an encoder on every call.
_ARGUMENTS: Final = json.JSONEncoder(ensure_ascii=False)
_MARSHAL_FORMAT: Final = 2  # ``ToolCache``'s keys: every value written in full, no back-references
# A field the client did not send is left out of the upstream body (``ChatRequest.extra``'s ``OMIT``), so the
# upstream applies its own default.
_OMIT: Final = OMIT


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on one request.

    Attributes:
        max_body_bytes: the largest request body read.
        max_tools: the most tools one request may declare.
        default_max_tokens: the completion budget of an in-process model when the client sets none.
    """

    max_body_bytes: int = 8 * 1024 * 1024
    max_tools: int = 128
    default_max_tokens: int = 1024


@dataclass(frozen=True, slots=True)
class ProxyRequest:
    """What the proxy understood of one chat completions body.

    Attributes:
        body: the body as sent.
        stream: the client asked for SSE.
        include_usage: the client asked for a usage chunk at the end of the stream.
        tools: the declared tools, checked.
        tool_choice: ``auto``, ``none``, ``required`` or one tool's name.
        parallel: more than one call may be answered.
        chat: the request for the backend.
        polling: the tools the policy declares polling (identical calls may return new results).
    """

    body: Mapping[str, Any]
    stream: bool
    include_usage: bool
    tools: tuple[ToolSpec, ...]
    tool_choice: str
    parallel: bool
    chat: ChatRequest
    polling: frozenset[str] = frozenset()

    @property
    def parses(self) -> bool:
        """Whether the answer is parsed for tool calls (tools declared and ``tool_choice`` is not ``none``)."""
        return bool(self.tools) and self.tool_choice != "none"


def check_tools(raw: Any, *, max_tools: int, policy: ToolPolicy | None = None) -> tuple[ToolSpec, ...]:
    """Check a request's ``tools`` and return them as ``ToolSpec`` values, declared by ``policy``.

    A request's tools carry no metadata, so each is side-effecting for the parser (``lossless``: only calls in a
    delimited form) unless the proxy's policy file (``--policy``) declares it read-only.

    Raises:
        ProxyError: 400 naming the tool at fault and why.
    """
    if not isinstance(raw, list):
        raise invalid(f"'tools' must be a list of tool declarations, not {type(raw).__name__}", param="tools")
    if len(raw) > max_tools:
        raise invalid(
            f"the request declares {len(raw)} tools; this proxy accepts at most {max_tools} (--max-tools)",
            param="tools",
        )
    specs: list[ToolSpec] = []
    seen: set[str] = set()
    for position, item in enumerate(raw):
        where = f"tools[{position}]"
        if not isinstance(item, Mapping):
            raise invalid(f"{where} must be an object, not {type(item).__name__}", param=where)
        if item.get("type", "function") != "function":
            raise invalid(f"{where} has type {item.get('type')!r}; only 'function' tools are supported", param=where)
        try:
            spec = next(iter(normalize_tools([item]).values()))
        except ConfigError as exc:
            raise invalid(f"{where}: {exc}", param=where) from exc
        name = spec.name
        if not _NAME.fullmatch(name):
            raise invalid(
                f"tool {name!r} ({where}): a name is 1 to 64 letters, digits, '_', '-', '.' or ':'", param=where
            )
        if name in seen:
            raise invalid(f"tool {name!r} is declared twice ({where}); give each tool a unique name", param=where)
        seen.add(name)
        try:
            compiled(spec.parameters).validator(tool=name)  # compiled once per distinct schema, then cached
        except InvalidSchema as exc:
            raise invalid(
                f"tool {name!r} ({where}): 'parameters' is not a valid JSON Schema at {exc.path}: {exc.detail}",
                param=where,
            ) from exc
        specs.append(spec)
    return policy.declare(specs) if policy is not None else tuple(specs)


class ToolCache:
    """Checked tools by the content of a request's ``tools``: a bounded cache of an immutable result.

    Agents send the same tools with every request. Checking them (names, duplicates, every schema against its
    metaschema) and building their ``ToolSpec`` values happens once per distinct list; a later request with the
    same list gets the same ``ToolSpec`` objects, so the parser's and the validator's caches, which find a schema
    by identity before they compare content, hit as well.

    The key is the decoded list in ``marshal``'s byte form: a faithful serialization (``1``, ``1.0`` and ``true``
    differ; keys in the order sent), several times quicker here than ``json.dumps``, so a change anywhere in
    any tool is a different key and is checked afresh. It is marshal's format 2, which writes every value in
    full (later formats write a back-reference for an object met twice, so equal lists could differ by how their
    objects happen to be shared). The specs are built from an unmarshalled copy, so no
    cached object is shared with a request's body. Lists over ``max_bytes`` in that form are checked every time
    and not kept; when ``max_entries`` lists are held, the oldest goes.
    """

    def __init__(self, *, max_entries: int = 32, max_bytes: int = 256 * 1024, policy: ToolPolicy | None = None) -> None:
        """Keep at most ``max_entries`` lists, each at most ``max_bytes`` long as a key; declare tools by ``policy``."""
        self.policy = policy
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._specs: dict[bytes, tuple[ToolSpec, ...]] = {}

    def __len__(self) -> int:
        return len(self._specs)

    def check(self, raw: Any, *, max_tools: int) -> tuple[ToolSpec, ...]:
        """``check_tools(raw, max_tools=max_tools)``, from the cache when the same list was checked before.

        Raises:
            ProxyError: 400 naming the tool at fault and why (a list that fails is never kept).
        """
        if not isinstance(raw, list) or len(raw) > max_tools:
            return check_tools(raw, max_tools=max_tools, policy=self.policy)
        try:
            key = marshal.dumps(raw, _MARSHAL_FORMAT)
        except ValueError:  # nested deeper than marshal goes: checked, not kept
            return check_tools(raw, max_tools=max_tools, policy=self.policy)
        specs = self._specs.get(key)
        if specs is not None:
            return specs
        if len(key) > self.max_bytes:
            return check_tools(raw, max_tools=max_tools, policy=self.policy)
        specs = check_tools(marshal.loads(key), max_tools=max_tools, policy=self.policy)
        if len(self._specs) >= self.max_entries:
            del self._specs[next(iter(self._specs))]
        self._specs[key] = specs
        return specs


def check_tool_choice(raw: Any, tools: Sequence[ToolSpec]) -> str:
    """Return ``auto``, ``none``, ``required`` or the named tool.

    Raises:
        ProxyError: 400 for an unknown form, or a name that is not among the tools.
    """
    if raw is None:
        return "auto"
    if raw in ("auto", "none", "required"):
        return str(raw)
    if isinstance(raw, Mapping):
        fn = raw.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else raw.get("name")
        if isinstance(name, str) and name:
            if name not in {t.name for t in tools}:
                raise invalid(
                    f"tool_choice names {name!r}, which is not among the request's tools", param="tool_choice"
                )
            return name
    raise invalid(
        f"tool_choice must be 'none', 'auto', 'required' or "
        f'{{"type": "function", "function": {{"name": ...}}}}, not {raw!r:.80}',
        param="tool_choice",
    )


def read_request(
    body: Any, *, limits: Limits, constrained: bool, tool_cache: ToolCache | None = None, local: bool = False
) -> ProxyRequest:
    """Check a chat completions body and build the backend request.

    Args:
        body: the decoded JSON body.
        limits: the request bounds.
        constrained: the upstream can constrain decoding to a grammar (used for ``required`` and a named tool).
        tool_cache: where checked tool lists are kept (``None``: the tools are checked on every request).
        local: the upstream is the in-process model (every request is rendered here, never forwarded).

    Raises:
        ProxyError: 400 saying what is wrong with the request.
    """
    if not isinstance(body, Mapping):
        raise invalid("the body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, Mapping) for m in messages):
        raise invalid("'messages' must be a non-empty list of message objects", param="messages")
    if body.get("functions") is not None or body.get("function_call") is not None:
        raise invalid("'functions' and 'function_call' are the legacy API; send 'tools' and 'tool_choice'")
    declared = body.get("tools")
    check_fields(body, local=local, tools=bool(declared))
    if not declared:
        specs: tuple[ToolSpec, ...] = ()
    elif tool_cache is not None:
        specs = tool_cache.check(declared, max_tools=limits.max_tools)
    else:
        specs = check_tools(declared, max_tools=limits.max_tools)
    if specs or local:  # rendered or rebuilt here; a request forwarded as sent keeps its parts for the upstream
        try:
            messages = normalize_messages(messages)
        except MessageError as exc:
            raise invalid(str(exc), param=exc.param) from exc
    choice = check_tool_choice(body.get("tool_choice"), specs) if specs else "auto"
    parallel = body.get("parallel_tool_calls") is not False
    stream = body.get("stream") is True
    options = body.get("stream_options")
    include_usage = stream and isinstance(options, Mapping) and options.get("include_usage") is True
    extra: dict[str, Any] = {k: v for k, v in body.items() if k not in _HANDLED}
    max_tokens = body.get("max_completion_tokens") or body.get("max_tokens")
    temperature = body.get("temperature")
    seed = body.get("seed")
    for key, value in (("max_tokens", max_tokens), ("temperature", temperature), ("seed", seed)):
        if value is None:
            extra[key] = _OMIT
    stop = body.get("stop")
    stops = (stop,) if isinstance(stop, str) else tuple(stop) if stop else ()
    chat = ChatRequest(
        messages=messages,
        tools=specs,
        max_tokens=max_tokens if max_tokens is not None else limits.default_max_tokens,
        temperature=float(temperature) if temperature is not None else 0.0,
        seed=seed,
        stop=stops,
        tool_choice=choice if specs else "auto",
        constrained=constrained and bool(specs) and choice not in ("auto", "none"),
        extra=extra,
    )
    policy = tool_cache.policy if tool_cache is not None else None
    polling = frozenset(t.name for t in specs if policy.polls(t.name)) if policy is not None else frozenset()
    return ProxyRequest(body, stream, include_usage, specs, choice, parallel, chat, polling)


def new_id(prefix: str) -> str:
    """A fresh identifier (``chatcmpl-…``, ``call_…``), unique across requests."""
    return f"{prefix}{secrets.token_hex(12)}"


def tool_call_json(call: ToolCall, call_id: str, index: int | None = None) -> dict[str, Any]:
    """One OpenAI ``tool_calls`` entry (with ``index`` in stream deltas); arguments as a JSON string."""
    entry: dict[str, Any] = {} if index is None else {"index": index}
    entry.update(
        {
            "id": call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": _ARGUMENTS.encode(call.arguments)},
        }
    )
    return entry


def usage_json(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    """OpenAI's ``usage`` object."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def completion_json(
    *,
    model: str,
    content: str,
    reasoning: str,
    calls: Sequence[ToolCall],
    finish_reason: str | None,
    usage: Mapping[str, int] | None,
) -> dict[str, Any]:
    """A whole (non-streamed) chat completion: native ``tool_calls``, the rest of the content, the reasoning."""
    message: dict[str, Any] = {"role": "assistant", "content": content if content or not calls else None}
    if reasoning:
        message["reasoning_content"] = reasoning
        message["reasoning"] = reasoning
    if calls:
        message["tool_calls"] = [tool_call_json(c, new_id("call_")) for c in calls]
    answer: dict[str, Any] = {
        "id": new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "length"
                if finish_reason == "length"
                else "tool_calls"
                if calls
                else (finish_reason or "stop"),
                "logprobs": None,
            }
        ],
    }
    if usage is not None:
        answer["usage"] = dict(usage)
    return answer
