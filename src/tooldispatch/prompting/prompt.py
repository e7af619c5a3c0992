"""Turn a conversation with tools into one prompt string for a prompt-mode model.

Templates that render ``tools`` themselves (Qwen3, Llama 3.1+) get the tools and the OpenAI messages
unchanged. For the others, the tool block of the family's format goes into the system prompt, assistant
``tool_calls`` are written back as text in that format, and tool results become either ``tool`` messages
or user turns wrapped the way the format expects.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tooldispatch.prompting.formats import ToolFormat, get_format
from tooldispatch.prompting.template import ChatTemplate
from tooldispatch.toolspec import ToolSpec


def _text(content: Any) -> str:
    """Message content as text (OpenAI content parts are joined)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return str(content)


def _calls(message: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    out: list[tuple[str, Mapping[str, Any]]] = []
    for call in message.get("tool_calls") or ():
        fn = call.get("function", call) if isinstance(call, Mapping) else {}
        args = fn.get("arguments", {})
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except ValueError:
                args = {"_raw": args}
        out.append((str(fn.get("name", "")), args if isinstance(args, Mapping) else {"_value": args}))
    return out


def prepare_messages(
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[ToolSpec],
    *,
    tool_format: str | ToolFormat,
    tool_results: str = "user_turn",
) -> list[dict[str, str]]:
    """Rewrite OpenAI messages for a template that knows nothing about tools.

    Args:
        messages: OpenAI chat messages; assistant messages may carry ``tool_calls``, ``tool`` messages
            carry results.
        tools: the tools offered; when empty, no tool block is added.
        tool_format: the family's format (name or value).
        tool_results: ``user_turn`` (consecutive results become one user turn, each wrapped by the format)
            or ``tool_role`` (results stay ``tool`` messages, unwrapped).

    Returns:
        Messages with only ``role`` and string ``content``.
    """
    fmt = get_format(tool_format) if isinstance(tool_format, str) else tool_format
    out: list[dict[str, str]] = []
    block = fmt.system(tools) if tools else ""
    rest = list(messages)
    if rest and rest[0].get("role") == "system":
        system = _text(rest.pop(0).get("content"))
        if block:
            system = f"{system}\n\n{block}" if system else block
        out.append({"role": "system", "content": system})
    elif block:
        out.append({"role": "system", "content": block})
    pending: list[str] = []
    for m in rest:
        role = str(m.get("role", "user"))
        if role == "tool" and tool_results == "user_turn":
            pending.append(fmt.result(_text(m.get("content"))))
            continue
        if pending:
            out.append({"role": "user", "content": "\n".join(pending)})
            pending = []
        content = _text(m.get("content"))
        if role == "assistant" and m.get("tool_calls"):
            calls = fmt.calls(_calls(m))
            content = f"{content}\n{calls}" if content.strip() else calls
        out.append({"role": role, "content": content})
    if pending:
        out.append({"role": "user", "content": "\n".join(pending)})
    return out


def native_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Messages for a template that renders tools itself, with each call's arguments as an object.

    OpenAI messages carry ``tool_calls[].function.arguments`` as a JSON string. Templates write them
    with ``arguments | tojson`` (Qwen2.5, Qwen3, Hermes), which turns a string into a quoted string:
    the model would read its own earlier call as ``"arguments": "{\"id\": 1}"``, unlike anything it
    was trained on. Decoded here (as ``transformers`` expects them), they render as the model wrote them.
    A string that is not JSON is kept as it is.
    """
    out: list[dict[str, Any]] = []
    for m in messages:
        calls = m.get("tool_calls")
        if not calls:
            out.append(dict(m))
            continue
        fixed: list[Any] = []
        for call in calls:
            fn = call.get("function") if isinstance(call, Mapping) else None
            args = fn.get("arguments") if isinstance(fn, Mapping) else None
            if isinstance(args, str):
                try:
                    decoded = json.loads(args) if args.strip() else {}
                except ValueError:
                    decoded = args
                call = {**call, "function": {**fn, "arguments": decoded}}  # type: ignore[dict-item]
            fixed.append(call)
        out.append({**m, "tool_calls": fixed})
    return out


def render_prompt(
    template: ChatTemplate,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[ToolSpec] = (),
    *,
    tool_format: str | ToolFormat,
    tool_results: str = "user_turn",
    native: bool | None = None,
    add_generation_prompt: bool = True,
    template_kwargs: Mapping[str, Any] | None = None,
) -> str:
    """Render the whole prompt for one model turn.

    Args:
        template: the model's chat template.
        messages: OpenAI chat messages.
        tools: the tools offered this turn.
        tool_format: the family's tool format, used when the template does not render tools.
        tool_results: how results go back when the template does not render tools.
        native: force (``True``) or forbid (``False``) the template's own tool rendering; ``None`` uses
            it when the template reads ``tools``.
        add_generation_prompt: end with the opening of an assistant turn.
        template_kwargs: extra template variables (``enable_thinking``).

    Returns:
        The prompt text, ready to tokenize (special tokens as text).
    """
    kwargs = dict(template_kwargs or {})
    use_native = template.renders_tools if native is None else native
    if use_native:
        openai_tools = [t.to_openai() for t in tools] or None
        return template.render(
            native_messages(messages), tools=openai_tools, add_generation_prompt=add_generation_prompt, **kwargs
        )
    prepared = prepare_messages(messages, tools, tool_format=tool_format, tool_results=tool_results)
    return template.render(prepared, add_generation_prompt=add_generation_prompt, **kwargs)
