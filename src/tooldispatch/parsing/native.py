"""Tool calls a server already extracted (OpenAI ``tool_calls``), decoded with the same tolerance."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any, Final

from tooldispatch.parsing._raw import RawCall
from tooldispatch.parsing.formats._common import FIX_ARGUMENTS_STRING, FIX_FENCE, Decoded, decode_json, strip_fence
from tooldispatch.repair.types import is_mapping

FORMAT: Final = "openai"
FIX_UNQUOTED_PATH: Final = "unquoted_path"
"""The tolerance of a Windows path written as a value without quotes (``{"path": C:\\Users\\a.txt}``)."""
# A value that starts like a Windows path (drive or UNC share) and runs, without quotes, to the next ``,`` or
# ``}`` on its line. Bounded repeats only.
_UNQUOTED_PATH: Final = re.compile(r'(:[ \t]{0,8})((?:[A-Za-z]:|\\\\[\w.$-]{1,64})\\[^,}\n"]{0,1024}?)([ \t]{0,8}[,}])')


def _field(obj: Any, key: str) -> Any:
    if is_mapping(obj):
        return obj.get(key)
    return getattr(obj, key, None)


def read_native_calls(native_calls: Iterable[Any]) -> list[tuple[RawCall, str | None]]:
    """Turn an OpenAI ``tool_calls`` list into ``RawCall`` values, each with the server's id.

    Entries may be dicts or SDK objects. ``function.arguments`` is normally a JSON string (often
    malformed from local servers); it is decoded leniently. An object in its place is taken as is.
    """
    out: list[tuple[RawCall, str | None]] = []
    for entry in native_calls:
        fn = _field(entry, "function")
        source = fn if fn is not None else entry
        name = _field(source, "name")
        name = name if isinstance(name, str) and name else None
        ident = _field(entry, "id")
        ident = ident if isinstance(ident, str) and ident else None
        raw_args = _field(source, "arguments")
        raw = _raw_text(name, raw_args)
        if raw_args is None or (isinstance(raw_args, str) and not raw_args.strip()):
            call = RawCall((-1, -1), raw, FORMAT, "native", name, arguments={}, arguments_text=raw_args)
        elif isinstance(raw_args, str):
            payload, fence = _without_fence(raw_args)
            decoded = decode_json(payload)
            if decoded.error is not None and "\\" in payload:
                quoted = _UNQUOTED_PATH.sub(_quote_path, payload)
                retry = decode_json(quoted) if quoted != payload else decoded
                if retry.error is None:
                    decoded = Decoded(retry.value, (FIX_UNQUOTED_PATH, *retry.fixes), None, retry.complete)
            if fence and decoded.error is None:
                decoded = Decoded(decoded.value, (FIX_FENCE, *decoded.fixes), decoded.error, decoded.complete)
            if decoded.error is not None:
                call = RawCall(
                    (-1, -1),
                    raw,
                    FORMAT,
                    "native",
                    name,
                    arguments_text=raw_args,
                    decode_error=decoded.error,
                    truncated=not decoded.complete,
                )
            else:
                value = decoded.value
                fixes = decoded.fixes
                if isinstance(value, str):
                    # Arguments encoded twice: a JSON string holding the JSON object.
                    inner = decode_json(value)
                    if inner.error is None:
                        value, fixes = inner.value, (*fixes, FIX_ARGUMENTS_STRING, *inner.fixes)
                call = RawCall(
                    (-1, -1),
                    raw,
                    FORMAT,
                    "native",
                    name,
                    arguments=value,
                    arguments_text=raw_args,
                    lenient=fixes,
                    truncated=not decoded.complete,
                )
        else:
            call = RawCall((-1, -1), raw, FORMAT, "native", name, arguments=raw_args)
        out.append((call, ident))
    return out


def _quote_path(m: re.Match[str]) -> str:
    return f"{m.group(1)}{_quoted(m.group(2).rstrip())}{m.group(3)}"


def _without_fence(arguments: str) -> tuple[str, bool]:
    """Arguments with the fence residue some servers leave: a whole ``json`` fence, or its ``json`` tag alone."""
    head = arguments.lstrip()
    if head.startswith("```"):
        body, fenced = strip_fence(arguments)
        return (body, True) if fenced else (head[3:].removeprefix("json").rstrip().removesuffix("```"), True)
    if head.startswith("json") and head[4:5] in ("\n", "\r", " ") and head[4:].lstrip().startswith(("{", "[")):
        return head[4:], True
    return arguments, False


def _raw_text(name: str | None, arguments: Any) -> str:
    if type(arguments) is str and (name is None or type(name) is str):
        # What json.dumps writes for these two strings, through its C string encoder alone.
        shown = "null" if name is None else _quoted(name)
        return f'{{"name": {shown}, "arguments": {_quoted(arguments)}}}'
    return json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False, default=str)


# The C string encoder ``json.dumps(..., ensure_ascii=False)`` uses.
_quoted: Callable[[str], str] = json.encoder.encode_basestring
