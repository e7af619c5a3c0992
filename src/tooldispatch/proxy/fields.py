"""The type and range of every chat completions field the proxy reads or passes on, checked before any work.

A body OpenAI would refuse is refused here with a 400 that names the field and what it must be
(``"stream": "yes"``, ``"temperature": NaN``, ``"n": 2``), instead of reaching a backend that fails on it
later. Fields this table does not know are passed on to an HTTP upstream as sent (the upstream judges them)
and not read in process.

Some fields ask for what an upstream cannot give: ``logprobs`` and ``response_format`` other than ``text``
from the in-process model (it returns no log probabilities and applies no JSON grammar), and ``logprobs`` on a
request with tools (the answer is rebuilt from the parsed output, which has none). Those are a 400 saying
so, never a silently different answer.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from tooldispatch.proxy.errors import ProxyError, invalid

# A ``\uD800``-``\uDFFF`` escape: a body without one cannot hold a lone surrogate (a raw one is not UTF-8).
_SURROGATE: Final = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False)


def too_deep() -> ProxyError:
    """The 400 for a body nested deeper than the proxy reads."""
    return invalid("the body is nested too deeply to read; send at most a few hundred levels of arrays and objects")


def _constant(name: str) -> Any:
    raise invalid(f"the body is not JSON: {name} is not a JSON value; send a finite number")


def decode_body(raw: bytes) -> Any:
    """The decoded JSON body, refusing what JSON does not allow but Python's decoder takes.

    Raises:
        ProxyError: 400 for a body that is not JSON (``NaN`` and ``Infinity`` included), is nested too deeply,
            or holds a lone UTF-16 surrogate (``"\\ud800"``, which no UTF-8 text can carry upstream).
    """
    try:
        body = json.loads(raw, parse_constant=_constant)
    except RecursionError:
        raise too_deep() from None
    except ValueError as exc:
        raise invalid(f"the body is not JSON: {exc}") from None
    if _SURROGATE.search(raw):
        try:
            _ENCODER.encode(body).encode("utf-8")
        except UnicodeEncodeError:
            raise invalid(
                "the body holds a lone UTF-16 surrogate (an unpaired \\ud800-\\udfff escape), which is not text; "
                "send valid surrogate pairs or the characters themselves"
            ) from None
        except RecursionError:
            raise too_deep() from None
    return body


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _bool(key: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise invalid(f"{key!r} must be true or false, not {value!r:.40}", param=key)


def _string(key: str, value: Any) -> None:
    if not isinstance(value, str):
        raise invalid(f"{key!r} must be a string, not {_kind(value)}", param=key)


def _object(key: str, value: Any) -> None:
    if not isinstance(value, Mapping):
        raise invalid(f"{key!r} must be an object, not {_kind(value)}", param=key)


def _integer(low: int, high: int | None = None) -> Callable[[str, Any], None]:
    def check(key: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
            bound = f"from {low} to {high}" if high is not None else f"of at least {low}"
            raise invalid(f"{key!r} must be an integer {bound}, not {value!r:.40}", param=key)

    return check


def _number(low: float, high: float) -> Callable[[str, Any], None]:
    def check(key: str, value: Any) -> None:
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not low <= value <= high
        ):
            raise invalid(f"{key!r} must be a number from {low:g} to {high:g}, not {value!r:.40}", param=key)

    return check


def _stop(key: str, value: Any) -> None:
    if isinstance(value, str):
        return
    if not isinstance(value, list) or len(value) > 16 or not all(isinstance(s, str) for s in value):
        raise invalid(f"{key!r} must be a string or a list of at most 16 strings, not {value!r:.60}", param=key)


def _stream_options(key: str, value: Any) -> None:
    _object(key, value)
    usage = value.get("include_usage")
    if usage is not None and not isinstance(usage, bool):
        raise invalid(f"'stream_options.include_usage' must be true or false, not {usage!r:.40}", param=key)


def _response_format(key: str, value: Any) -> None:
    _object(key, value)
    kind = value.get("type")
    if kind not in ("text", "json_object", "json_schema"):
        raise invalid(
            f"'response_format.type' must be 'text', 'json_object' or 'json_schema', not {kind!r:.40}", param=key
        )
    if kind == "json_schema":
        spec = value.get("json_schema")
        if not isinstance(spec, Mapping) or not isinstance(spec.get("schema", {}), Mapping):
            raise invalid("'response_format.json_schema' must be an object with a 'schema' object", param=key)


def _n(key: str, value: Any) -> None:
    if value != 1 or isinstance(value, bool):
        raise invalid("this proxy answers one choice per request; leave 'n' unset or 1", param=key)


_CHECKS: Final[dict[str, Callable[[str, Any], None]]] = {
    "model": _string,
    "stream": _bool,
    "stream_options": _stream_options,
    "max_tokens": _integer(1),
    "max_completion_tokens": _integer(1),
    "n": _n,
    "temperature": _number(0, 2),
    "top_p": _number(0, 1),
    "frequency_penalty": _number(-2, 2),
    "presence_penalty": _number(-2, 2),
    "seed": _integer(-(2**63), 2**64 - 1),
    "stop": _stop,
    "logprobs": _bool,
    "top_logprobs": _integer(0, 20),
    "logit_bias": _object,
    "response_format": _response_format,
    "parallel_tool_calls": _bool,
    "user": _string,
    "metadata": _object,
}


def check_fields(body: Mapping[str, Any], *, local: bool, tools: bool) -> None:
    """Check every known field of a chat completions body (``None`` means unset, as OpenAI reads it).

    Args:
        body: the decoded body.
        local: the upstream is the in-process model.
        tools: the request declares tools (its answer is rebuilt from the parsed output).

    Raises:
        ProxyError: 400 naming the field and what it must be, or what the upstream cannot give.
    """
    for key, check in _CHECKS.items():
        value = body.get(key)
        if value is not None:
            check(key, value)
    if body.get("logprobs") is True and (local or tools):
        where = (
            "the in-process model returns none" if local else "an answer with tools is rebuilt from the parsed output"
        )
        raise invalid(f"'logprobs' cannot be answered here ({where}); leave it unset or false", param="logprobs")
    fmt = body.get("response_format")
    if local and fmt is not None and fmt.get("type") != "text":
        raise invalid(
            f"response_format {fmt.get('type')!r} is not applied by the in-process model (it has no JSON grammar "
            "for it); serve the model with llama-server or vLLM (--base-url), or leave response_format out",
            param="response_format",
        )
