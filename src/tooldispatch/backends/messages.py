"""Chat messages in the one form every backend renders: ``content`` a string (or ``None``), known roles.

OpenAI clients may send a message's ``content`` as a list of parts (``[{"type": "text", "text": ...}]``, the
form smolagents and Qwen Code send in every role) and system instructions under the ``developer`` role.
Chat templates and the prompt formats read a string and know ``system``: ``normalize_messages`` joins the
text parts (one newline between parts, as vLLM joins them) and names ``developer`` ``system``. A part a
text-only model cannot read (an image, audio, a file) is refused with a message saying so, never dropped.

A list of messages already in that form is returned as it came (the common case costs one pass over it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from tooldispatch.errors import ConfigError

_TEXT_PARTS: Final = frozenset({"text", "refusal", "input_text", "output_text"})


class MessageError(ConfigError):
    """A message cannot be given to a text-only model as sent.

    Attributes:
        param: where in the request the fault is (``messages[2].content``).
    """

    def __init__(self, message: str, *, param: str) -> None:
        super().__init__(message)
        self.param = param


def _plain(message: Any) -> bool:
    if not isinstance(message, Mapping):
        return False
    content = message.get("content")
    return (content is None or isinstance(content, str)) and message.get("role") != "developer"


def content_text(content: Any, *, where: str) -> str | None:
    """A message's ``content`` as one string (``None`` stays ``None``).

    Raises:
        MessageError: the content is neither a string nor a list of parts, or a part is not text.
    """
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise MessageError(
            f"{where} must be a string or a list of content parts, not {type(content).__name__}", param=where
        )
    texts: list[str] = []
    for position, part in enumerate(content):
        at = f"{where}[{position}]"
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, Mapping):
            raise MessageError(f"{at} must be a content part object, not {type(part).__name__}", param=at)
        kind = part.get("type")
        if kind in _TEXT_PARTS:
            text = part.get(kind if kind == "refusal" else "text")
            if not isinstance(text, str):
                raise MessageError(f"{at} is a {kind!r} part without a string {kind!r} field", param=at)
            texts.append(text)
        elif kind in ("image_url", "input_image", "image"):
            raise MessageError(
                f"{at} is an image; this model reads text only: send the text, or use a vision model", param=at
            )
        else:
            raise MessageError(f"{at} is a {kind!r} part; this model reads text parts only ('type': 'text')", param=at)
    return "\n".join(texts)


def normalize_messages(messages: Sequence[Mapping[str, Any]]) -> Sequence[Mapping[str, Any]]:
    """The messages with every ``content`` a string (or ``None``) and ``developer`` named ``system``.

    Returns ``messages`` itself when nothing needs changing; otherwise new message dicts (the input is not
    modified).

    Raises:
        MessageError: a message's content cannot be read as text (the message names the message and part).
    """
    if all(_plain(m) for m in messages):
        return messages
    out: list[Mapping[str, Any]] = []
    for position, message in enumerate(messages):
        if _plain(message):
            out.append(message)
            continue
        if not isinstance(message, Mapping):
            where = f"messages[{position}]"
            raise MessageError(f"{where} must be an object, not {type(message).__name__}", param=where)
        fixed = dict(message)
        if fixed.get("role") == "developer":
            fixed["role"] = "system"
        fixed["content"] = content_text(fixed.get("content"), where=f"messages[{position}].content")
        out.append(fixed)
    return out
