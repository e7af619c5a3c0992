"""MCP to registry and back: tool metadata from annotations, results as JSON values, errors as ``ToolError``.

Annotations are untrusted hints (the spec says so). Without ``trust`` they can only make dispatch more
careful: ``destructiveHint: true`` marks the tool destructive (so each call needs approval); a
``readOnlyHint`` or ``destructiveHint: false`` is noted and ignored. With ``"trust": "annotations"`` they
are taken as said, and each tool whose conservatism they lower is reported. Declarations in the config's
``tools`` win over both. ``idempotentHint`` and ``openWorldHint`` change nothing: a side-effecting call is
never re-run after it started, idempotent or not.

Failures map onto the retry policy and the model-visible error envelope:

==========================================  ==============================================================
what happened                               becomes
==========================================  ==============================================================
``isError`` result                          ``ToolError(retryable=False)``: the tool refused; the model may
                                            change its arguments (recoverable, never retried)
``-32602`` / ``-32601`` (bad params, no     ``ToolError(status=400 / 404)``: permanent, recoverable
such tool or method)
any other JSON-RPC error                    ``ToolError``: a read-only call is retried, a side-effecting
                                            one's outcome is unknown
server gone before the request was sent     ``ToolError(before_execution=True)``: retried, nothing ran
server gone with the request in flight      ``ServerLost``: outcome unknown, never re-run (read-only calls
                                            are retried)
==========================================  ==============================================================
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from tooldispatch.dispatch.executor import ChildProcessDied
from tooldispatch.errors import ToolError
from tooldispatch.mcp.config import ServerConfig

INVALID_PARAMS = -32602
METHOD_NOT_FOUND = -32601


class ServerLost(ChildProcessDied):
    """The MCP server went away while a request was in flight: its outcome is unknown."""


def metadata(config: ServerConfig, name: str, annotations: Mapping[str, Any] | None) -> tuple[dict[str, Any], str]:
    """Registry keywords for one MCP tool, and a note when annotations lowered or could have lowered caution.

    Args:
        config: the tool's server.
        name: the tool's name on the server.
        annotations: the tool's annotations as JSON (``readOnlyHint`` ... or their snake_case forms).

    Returns:
        ``(keywords for Registry.register, note)``; the note is empty when there is nothing to say.
    """
    ann = _hints(annotations or {})
    read_only, destructive = ann.get("read_only_hint"), ann.get("destructive_hint")
    kw: dict[str, Any] = {}
    note = ""
    if destructive is True and read_only is not True:
        kw["destructive"] = True
    lowering = read_only is True or (destructive is False and read_only is not True)
    if lowering and config.trust == "annotations":
        if read_only is True:
            kw.update(read_only=True, concurrency_safe=True)
            note = "read-only (readOnlyHint, trusted)"
        else:
            kw["destructive"] = False
            note = "not destructive (destructiveHint: false, trusted)"
    elif lowering:
        note = "annotations ignored (untrusted)"
    declared = dict(config.tools.get(name, {}))
    if declared.get("read_only") is True and "destructive" not in declared:
        kw.pop("destructive", None)
    kw.update(declared)
    kw.setdefault("timeout_s", config.timeout_s)
    return kw, note


def _hints(annotations: Mapping[str, Any]) -> dict[str, Any]:
    names = {
        "readOnlyHint": "read_only_hint",
        "destructiveHint": "destructive_hint",
        "idempotentHint": "idempotent_hint",
        "openWorldHint": "open_world_hint",
    }
    return {names.get(k, k): v for k, v in annotations.items() if isinstance(v, bool)}


def result_value(result: Any) -> Any:
    """A ``CallToolResult`` as the JSON value the dispatcher bounds and the model sees.

    Structured content is kept as it is; otherwise one text block is its text, and several blocks (or
    images, audio, resources) are a list of their JSON forms.

    Raises:
        ToolError: the result has ``isError`` set (a permanent, recoverable refusal).
    """
    if result.is_error:
        raise ToolError(_text(result) or "the tool reported an error without a message", retryable=False)
    if result.structured_content is not None:
        return result.structured_content
    blocks = list(result.content)
    if len(blocks) == 1 and getattr(blocks[0], "type", None) == "text":
        return blocks[0].text
    return [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in blocks]


def _text(result: Any) -> str:
    texts = [b.text for b in result.content if getattr(b, "type", None) == "text"]
    if texts:
        return "\n".join(texts)
    if result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False)[:2000]
    return ""


def protocol_error(server: str, code: int, message: str) -> ToolError:
    """A JSON-RPC error answer as a ``ToolError`` the retry policy and the model understand."""
    text = f"MCP server {server!r} answered error {code}: {message}"
    if code == INVALID_PARAMS:
        return ToolError(text, retryable=False, status=400)
    if code == METHOD_NOT_FOUND:
        return ToolError(text, retryable=False, status=404)
    return ToolError(text)
