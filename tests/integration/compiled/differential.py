"""Seeded cases through the parser, the stream parser and repair; one line per case.

Run as a script (``python differential.py SEED COUNT``) by ``test_compiled_build.py``, once with the compiled
modules and once with the sources alone; the two outputs must be equal.
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

from tooldispatch import StreamParser, normalize_tools, parse_tool_calls, repair_call
from tooldispatch.errors import ConfigError

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer"},
    },
    "required": ["city"],
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
    {"name": "list_drivers", "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}},
]
PIECES = [
    "<tool_call>",
    "</tool_call>",
    "<think>",
    "</think>",
    "[TOOL_CALLS]",
    "<|python_tag|>",
    "```json\n",
    "```",
    "\n",
    " ",
    "[",
    "]",
    "{",
    "}",
    "(",
    ")",
    '"',
    "'",
    ",",
    ":",
    "get_weather(",
    "list_drivers",
    "<function=get_weather>",
    "<parameter=city>",
    "</parameter>",
    "</function>",
    '<invoke name="get_weather">',
    "<|channel|>commentary to=",
    "<|message|>",
    "<|call|>",
    "Sure, ",
    "None",
    "True",
    "nan",
    "\\",
    "\ud800",
]
VALUES: list[Any] = [
    None,
    True,
    0,
    -1,
    1.5,
    10**20,
    "",
    "Paris",
    "celcius",
    "Celsius",
    "3",
    [],
    ["a"],
    {},
    {"a": [None]},
]
SCHEMAS: list[Any] = [
    {"type": "string"},
    {"type": "integer"},
    {"type": ["number", "null"]},
    {"enum": ["a", "b", 1]},
    {"type": "array", "items": {"type": "integer"}},
    {"anyOf": [{"type": "string"}, {"type": "array"}]},
    {"type": "object", "properties": {"x": {"type": "boolean"}}, "additionalProperties": False},
    {"$ref": "#/$defs/u"},
]


def _call(rng: random.Random) -> str:
    name = rng.choice(["get_weather", "Get-Weather", "get_wether", "list_drivers", "tool_name", 5, None])
    args = {k: rng.choice(VALUES) for k in rng.sample(["city", "unit", "days", "City", "zone"], rng.randint(0, 3))}
    body = json.dumps({"name": name, rng.choice(["arguments", "parameters"]): args})
    if rng.random() < 0.3:
        body = body.replace('"', "'")
    if rng.random() < 0.2:
        body = body[: rng.randint(0, len(body))]
    return rng.choice(["<tool_call>%s</tool_call>", "%s", "[%s]", "Sure: %s", "<think>%s</think>"]) % body


def _text(rng: random.Random) -> str:
    parts = [_call(rng) if rng.random() < 0.5 else rng.choice(PIECES) for _ in range(rng.randint(0, 6))]
    return "".join(parts)


def _shown(run: Any) -> str:
    try:
        return repr(run())
    except (ConfigError, TypeError, ValueError, RuntimeError) as exc:
        return f"{type(exc).__name__}: {exc}"


def _stream(text: str, size: int, ropen: bool) -> tuple[list[Any], Any]:
    parser = StreamParser(TOOLS, reasoning_open=ropen)
    events = [e for i in range(0, len(text), size) for e in parser.feed(text[i : i + size])]
    events += parser.close()
    return [e if type(e).__name__ != "ReasoningEnded" else "ended" for e in events], parser.outcome


def case(rng: random.Random) -> str:
    text = _text(rng)
    ropen = rng.random() < 0.2
    finish = rng.choice([None, "length"])
    level = rng.choice(["bounded", "lossless", "none"])
    tolerant = rng.random() >= 0.25
    size = rng.randint(1, 9)
    schema = {"type": "object", "properties": {"v": rng.choice(SCHEMAS)}, "$defs": {"u": {"type": "string"}}}
    specs = normalize_tools([{"name": "t", "parameters": schema}])
    arguments = {"v": rng.choice(VALUES)} if rng.random() < 0.8 else rng.choice(VALUES)
    lines = [
        _shown(
            lambda: parse_tool_calls(
                text, TOOLS, finish_reason=finish, reasoning_open=ropen, repair=level, tolerant=tolerant
            )
        ),
        _shown(lambda: _stream(text, size, ropen)),
        _shown(lambda: repair_call(rng.choice(["t", "T", "nope"]), arguments, specs, level=level)),
    ]
    return " | ".join(lines)


if __name__ == "__main__":
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    rng = random.Random(seed)
    sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[attr-defined]
    for _ in range(count):
        print(case(rng))
