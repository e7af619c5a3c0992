"""Pieces the prompt formats of several format modules share: JSON and Python spellings, the tool list, results.

Each format module writes its own prompt wording (see ``Format.prompts``); these are the helpers they have in
common.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tooldispatch.toolspec import ToolSpec


def dumps(value: Any) -> str:
    """JSON text as a model should see it (non-ASCII characters kept)."""
    return json.dumps(value, ensure_ascii=False)


def py_literal(value: Any) -> str:
    """A Python literal for a JSON value (``true`` → ``True``), parseable by ``ast.literal_eval``."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (int, float, str)):
        return dumps(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{dumps(str(k))}: {py_literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    return dumps(str(value))


def py_call(name: str, args: Mapping[str, Any]) -> str:
    """One Python call with keyword arguments."""
    return f"{name}(" + ", ".join(f"{k}={py_literal(v)}" for k, v in args.items()) + ")"


def tool_lines(tools: Sequence[ToolSpec]) -> str:
    """The tools as OpenAI function declarations, one JSON object per line."""
    return "\n".join(dumps(t.to_openai()) for t in tools)


def tool_response(content: str) -> str:
    """A tool result in ``<tool_response>`` tags, the wrapping most chat templates use."""
    return f"<tool_response>\n{content}\n</tool_response>"
