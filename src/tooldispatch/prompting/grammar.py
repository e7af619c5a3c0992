"""GBNF grammars from tool schemas, for constrained decoding with llama.cpp (``LlamaGrammar.from_string``).

With ``tool_choice="required"`` (or a tool's name) the grammar admits exactly one tool call in the family's
syntax (or a list of calls, for the list formats). With ``tool_choice="auto"`` the model may answer instead:
text that cannot start a call (no ``<`` for the tag formats, no ``[``, backtick or ``{`` for the others),
optionally followed by the call, so the grammar binds only once a call starts, as llama.cpp's server does
for ``auto`` with its lazy grammars. A call names one of the offered tools, with arguments that follow that
tool's schema: required keys first in declared order, then optional keys in declared order, each optional;
``enum`` and ``const`` values as literals; strings, numbers, integers, booleans, null, arrays (typed by
``items``) and nested objects. Anything the generator does not model (``$ref``, ``pattern``, free-form
objects) falls back to a generic JSON value. Separators are fixed (``", "`` and ``": "``), so output looks
like ``json.dumps``.

``lazy_tool_call_grammar`` is the ``auto`` grammar for families whose models write JSON calls in shapes of
their own (a ```` ```json ```` fence, a bare ``{"name": ...}`` object) besides their format's: a grammar of
the call alone plus trigger patterns, for llama.cpp's lazy grammar sampler. Text before a trigger is free;
the grammar binds from the trigger on. A trigger fires only on a call object that names an offered tool,
written in one of the declared shapes, and only while the text so far is one the grammar accepts, so the
sampler is never handed text it cannot take. JSON whitespace is free there (llama.cpp's own ``space``
rule), so the model keeps its layout while the grammar binds names, keys and value types.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from tooldispatch.errors import ConfigError
from tooldispatch.parsing.formats._prompt import py_literal
from tooldispatch.prompting.formats import FORMATS
from tooldispatch.toolspec import ToolSpec
from tooldispatch.types import Reasoning

Dialect = Literal["json", "python"]

_PRIMITIVES: Mapping[str, str] = {
    # Strings are bounded (64 characters): a small model under a grammar otherwise tends to repeat a
    # pattern inside an open string until the token budget runs out, which leaves no call at all.
    "string": '"\\"" char{0,64} "\\""',
    "char": '[^"\\\\\\x7F\\x00-\\x1F] | "\\\\" (["\\\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])',
    "integer": '"-"? ("0" | [1-9] [0-9]*)',
    "number": 'integer ("." [0-9]+)? ([eE] [-+]? [0-9]+)?',
    "value": "object | array | string | number | boolean | null",
    "object": '"{" (string ": " value (", " string ": " value)*)? "}"',
    "array": '"[" (value (", " value)*)? "]"',
}
_DEPENDS: Mapping[str, tuple[str, ...]] = {
    "string": ("char",),
    "number": ("integer",),
    "value": ("object", "array", "string", "number", "boolean", "null"),
    "object": ("string", "value"),
    "array": ("value",),
}
_PRIMITIVE_ORDER = ("value", "object", "array", "string", "char", "number", "integer", "boolean", "null", "ws")

# JSON with free whitespace (lazy grammars): llama.cpp's ``space`` rule, and the containers using it.
_WS = '| " " | "\\n" [ \\t]{0,20}'
_WS_REGEX = "(?: |\\n[ \\t]{0,20})?"
_SPACED_CONTAINERS: Mapping[str, str] = {
    "object": '"{" ws (string ws ":" ws value (ws "," ws string ws ":" ws value)*)? ws "}"',
    "array": '"[" ws (value (ws "," ws value)*)? ws "]"',
}


def gbnf_literal(text: str) -> str:
    """Quote text as a GBNF string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return '"' + escaped.replace("\t", "\\t") + '"'


def _rule_name(text: str) -> str:
    name = re.sub(r"[^a-zA-Z0-9]+", "-", text).strip("-").lower()
    return name or "x"


class _Builder:
    def __init__(self, dialect: Dialect, *, spaced: bool = False) -> None:
        self.dialect = dialect
        self.spaced = spaced
        self.rules: dict[str, str] = {}
        self.primitives: set[str] = set()

    def use(self, primitive: str) -> str:
        if primitive not in self.primitives:
            self.primitives.add(primitive)
            for dep in _DEPENDS.get(primitive, ()):
                self.use(dep)
            if self.spaced and primitive in _SPACED_CONTAINERS:
                self.use("ws")
        return primitive

    def sep(self, text: str) -> str:
        """A separator (``", "`` or ``": "``): fixed, or its punctuation between free whitespace."""
        if not self.spaced:
            return gbnf_literal(text)
        self.use("ws")
        return f"ws {gbnf_literal(text.strip())} ws"

    def add(self, base: str, body: str) -> str:
        name, n = base, 2
        while name in self.rules or name in _PRIMITIVES or name in ("root", "boolean", "null"):
            name, n = f"{base}{n}", n + 1
        self.rules[name] = body
        return name

    def const(self, value: Any) -> str:
        text = py_literal(value) if self.dialect == "python" else json.dumps(value, ensure_ascii=False)
        return gbnf_literal(text)

    def value(self, schema: Any, name: str) -> str:
        if not isinstance(schema, Mapping):
            return self.use("value")
        if "const" in schema:
            return self.const(schema["const"])
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return "(" + " | ".join(self.const(v) for v in schema["enum"]) + ")"
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                return "(" + " | ".join(self.value(o, f"{name}-{i}") for i, o in enumerate(options)) + ")"
        kind = schema.get("type")
        if kind is None and isinstance(schema.get("properties"), Mapping):
            kind = "object"
        if isinstance(kind, list) and kind:
            return "(" + " | ".join(self.value({**schema, "type": k}, name) for k in kind) + ")"
        if kind in ("string", "integer", "number"):
            return self.use(kind)
        if kind == "boolean":
            self.use("boolean")
            return "boolean"
        if kind == "null":
            self.use("null")
            return "null"
        if kind == "array":
            item = self.value(schema.get("items"), f"{name}-item")
            comma = self.sep(", ")
            more = f"{item} ({comma} {item})*"
            min_items = schema.get("minItems", 0)
            open_, close = ('"[" ws', 'ws "]"') if self.spaced else ('"["', '"]"')
            has_items = isinstance(min_items, int) and min_items > 0
            body = f"{open_} {more} {close}" if has_items else f"{open_} ({more})? {close}"
            return self.add(name, body)
        if kind == "object" and isinstance(schema.get("properties"), Mapping) and schema["properties"]:
            return self.add(name, self.members(schema, name, "{", "}", json_keys=True))
        return self.use("object" if kind == "object" else "value")

    def members(self, schema: Mapping[str, Any], name: str, open_: str, close: str, *, json_keys: bool) -> str:
        props: Mapping[str, Any] = schema.get("properties") or {}
        raw_required = schema.get("required")
        req_list: list[Any] = raw_required if isinstance(raw_required, list) else []
        required = [k for k in props if k in req_list] + [k for k in req_list if k not in props]
        optional = [k for k in props if k not in req_list]

        spaced = self.spaced and json_keys
        comma = self.sep(", ") if json_keys else gbnf_literal(", ")

        def member(key: str) -> str:
            value = self.value(props.get(key), f"{name}-{_rule_name(key)}")
            if not json_keys:
                return f"{gbnf_literal(f'{key}=')} {value}"
            if spaced:
                return f"{gbnf_literal(json.dumps(key, ensure_ascii=False))} {self.sep(': ')} {value}"
            return f"{gbnf_literal(json.dumps(key, ensure_ascii=False) + ': ')} {value}"

        req = [member(k) for k in required]
        opt = [member(k) for k in optional]
        if req:
            body = " ".join([req[0], *(f"{comma} {r}" for r in req[1:]), *(f"({comma} {o})?" for o in opt)])
        elif opt:
            alts = [" ".join([o, *(f"({comma} {p})?" for p in opt[i + 1 :])]) for i, o in enumerate(opt)]
            body = "(" + " | ".join(alts) + ")?"
        elif spaced:
            return f"{gbnf_literal(open_)} ws {gbnf_literal(close)}"
        else:
            return f"{gbnf_literal(open_ + close)}"
        if spaced:
            return f"{gbnf_literal(open_)} ws {body} ws {gbnf_literal(close)}"
        return f"{gbnf_literal(open_)} {body} {gbnf_literal(close)}"

    def render(self, root: str) -> str:
        lines = [f"root ::= {root}"]
        lines += [f"{k} ::= {v}" for k, v in self.rules.items()]
        prim = dict(_PRIMITIVES)
        if self.spaced:
            prim.update(_SPACED_CONTAINERS)
            prim["ws"] = _WS
        prim["boolean"] = '"True" | "False"' if self.dialect == "python" else '"true" | "false"'
        prim["null"] = '"None"' if self.dialect == "python" else '"null"'
        lines += [f"{k} ::= {prim[k]}" for k in _PRIMITIVE_ORDER if k in self.primitives]
        return "\n".join(lines) + "\n"


def _json_calls(b: _Builder, tools: Sequence[ToolSpec], args_key: str) -> str:
    alts = []
    for t in tools:
        base = _rule_name(t.name)
        props = t.parameters.get("properties")
        if isinstance(props, Mapping) and (props or t.parameters.get("additionalProperties") is not True):
            args = b.members(t.parameters, f"{base}-args", "{", "}", json_keys=True)
            if props:
                args = b.add(f"{base}-args", args)
        else:
            args = b.use("object")
        if b.spaced:
            name = gbnf_literal(json.dumps(t.name, ensure_ascii=False))
            colon, comma = b.sep(": "), b.sep(", ")
            head = f'"{{" ws "\\"name\\"" {colon} {name} {comma} "\\"{args_key}\\"" {colon}'
            alts.append(b.add(f"call-{base}", f'{head} {args} ws "}}"'))
        else:
            head = gbnf_literal(json.dumps({"name": t.name}, ensure_ascii=False)[:-1] + f', "{args_key}": ')
            alts.append(b.add(f"call-{base}", f'{head} {args} "}}"'))
    return b.add("call", " | ".join(alts))


def _python_calls(b: _Builder, tools: Sequence[ToolSpec]) -> str:
    alts = []
    for t in tools:
        base = _rule_name(t.name)
        body = b.members(t.parameters, f"{base}-args", f"{t.name}(", ")", json_keys=False)
        alts.append(b.add(f"call-{base}", body))
    return b.add("call", " | ".join(alts))


def tool_call_grammar(
    tools: Sequence[ToolSpec],
    tool_format: str,
    *,
    tool_choice: str = "auto",
    reasoning: Reasoning | None = None,
) -> str:
    """Build the GBNF grammar for one constrained tool-call turn.

    Args:
        tools: the tools offered; the call must name one of them.
        tool_format: the family's format (``hermes``, ``hermes_list``, ``json``, ``pythonic``,
            ``gemma_tool_code``).
        tool_choice: ``auto`` (an answer, or text then a call, or a call), ``required`` (a call of any offered
            tool) or one tool's name (a call of that tool).
        reasoning: the family's reasoning markers; when given, a reasoning block (without ``<``) may come
            before the call, and must when the template already opened it.

    Returns:
        Grammar text whose start rule is ``root``.

    Raises:
        ConfigError: no tools, an unknown format, or ``tool_choice`` names a tool that is not offered.
    """
    if tool_format not in FORMATS:
        raise ConfigError(f"no grammar for tool format {tool_format!r}; choose one of {', '.join(FORMATS)}")
    chosen = list(tools)
    if tool_choice not in ("auto", "required", "none"):
        chosen = [t for t in tools if t.name == tool_choice]
        if not chosen:
            raise ConfigError(f"tool_choice names {tool_choice!r}, which is not among the offered tools")
    if not chosen:
        raise ConfigError("constrained decoding needs at least one tool")
    fmt = FORMATS[tool_format]
    shape = fmt.grammar
    b = _Builder(shape.dialect)
    call = _python_calls(b, chosen) if shape.dialect == "python" else _json_calls(b, chosen, fmt.arguments_key)
    parts = [
        *([gbnf_literal(shape.open)] if shape.open else []),
        call,
        *([f'(", " {call})*'] if shape.many else []),
        *([gbnf_literal(shape.close)] if shape.close else []),
    ]
    root = " ".join(parts)
    if tool_choice == "auto":
        calls = b.add("tool-calls", root)
        answer = b.add("answer", f"[^{shape.start}]+")
        root = f"{calls} | {answer} {calls}?"
    if reasoning is not None:
        body = b.add("tool-calls" if tool_choice != "auto" else "turn", root)
        close = f"{gbnf_literal(reasoning.close)} [ \\n]*"
        if reasoning.starts_open:
            root = f"{b.add('think', f'[^<]* {close}')} {body}"
        else:
            root = f"{b.add('think', f'{gbnf_literal(reasoning.open)} [^<]* {close}')}? {body}"
    return b.render(root)


@dataclass(frozen=True, slots=True)
class CallShape:
    """A way of writing one JSON call object: the text around it, as GBNF and as a regex of its opening.

    Attributes:
        open: GBNF for the text before the object (empty for a bare object).
        open_regex: a regex (ECMAScript, for llama.cpp) of exactly the texts ``open`` admits.
        close: GBNF for the text after the object.
    """

    open: str
    open_regex: str
    close: str


CALL_SHAPES: Mapping[str, CallShape] = {
    "tool_call_tag": CallShape('"<tool_call>" ws', "<tool_call>" + _WS_REGEX, 'ws "</tool_call>"'),
    "json_fence": CallShape('"```" "json"? "\\n" ws', "```(?:json)?\\n" + _WS_REGEX, 'ws "```"'),
    "bare_json": CallShape("", "", ""),
}
"""Call shapes by name: the formats' own (``tool_call_tag``, ``bare_json``) and those a manifest's
``call_shapes`` may add (``json_fence``, ``bare_json``)."""

FORMAT_CALL_SHAPE: Mapping[str, str] = {
    name: fmt.grammar.lazy_shape for name, fmt in FORMATS.items() if fmt.grammar.lazy_shape is not None
}
"""The shape of one call in each format that writes a single JSON call object (``CallGrammar.lazy_shape``); the
others (lists of calls, Python calls) have no lazy grammar."""


@dataclass(frozen=True, slots=True)
class LazyGrammar:
    """A grammar that binds from a trigger on (llama.cpp's ``llama_sampler_init_grammar_lazy_patterns``).

    Attributes:
        text: GBNF whose ``root`` is the call, from the first character a trigger matches.
        trigger_patterns: regexes searched in the text generated so far; one matches when the text ends in the
            start of a call the grammar accepts, and its first group marks where the grammar takes over.
    """

    text: str
    trigger_patterns: tuple[str, ...]


def _regex_escape(text: str) -> str:
    """Escape text for an ECMAScript regex (std::regex, as llama.cpp compiles trigger patterns)."""
    return "".join("\\" + c if c in "\\^$.|?*+()[]{}/" else c for c in text)


def _any_prefix(parts: Sequence[str]) -> str:
    """A regex of every prefix of the concatenation of ``parts``: literal texts, and ``_WS_REGEX`` entries
    standing for the grammar's ``ws`` (whose language already holds every prefix of its words)."""
    tail = ""
    for part in reversed(parts):
        if part == _WS_REGEX:
            tail = part + tail
            continue
        shorter = ""
        for ch in reversed(part[:-1]):
            shorter = f"(?:{_regex_escape(ch)}{shorter})?"
        tail = f"(?:{_regex_escape(part)}{tail}|{shorter})"
    return tail


def lazy_tool_call_grammar(
    tools: Sequence[ToolSpec], tool_format: str, *, call_shapes: Sequence[str] = ()
) -> LazyGrammar:
    """Build the lazy grammar for a constrained ``tool_choice="auto"`` turn.

    Args:
        tools: the tools offered; a trigger fires only on a call naming one of them.
        tool_format: the family's format; its own call shape is always bound (``hermes``: ``<tool_call>``,
            ``json``: the bare object).
        call_shapes: further shapes the family's models write calls in (``json_fence``, ``bare_json``; the
            manifest's ``call_shapes``).

    Returns:
        The grammar of one or more calls in the shapes (each a line or a blank line after the last), and the
        trigger patterns that start it.

    Raises:
        ConfigError: no tools, a format without a single-JSON-object call, or an unknown shape.
    """
    own = FORMAT_CALL_SHAPE.get(tool_format)
    if own is None:
        raise ConfigError(
            f"tool format {tool_format!r} has no lazy grammar; call shapes need one of {', '.join(FORMAT_CALL_SHAPE)}"
        )
    unknown = [s for s in call_shapes if s not in CALL_SHAPES]
    if unknown:
        raise ConfigError(f"unknown call shape {unknown[0]!r}; choose among {', '.join(CALL_SHAPES)}")
    if not tools:
        raise ConfigError("constrained decoding needs at least one tool")
    shapes = [CALL_SHAPES[name] for name in dict.fromkeys([own, *call_shapes])]
    b = _Builder("json", spaced=True)
    args_key = FORMATS[tool_format].arguments_key
    call = _json_calls(b, tools, args_key)
    b.use("ws")
    # One call or several, a line or a blank line apart, as these models write a batch when decoding freely.
    shaped = b.add("shaped-call", " | ".join(" ".join(p for p in (s.open, call, s.close) if p) for s in shapes))
    root = f'{shaped} ("\\n"{{1,2}} {shaped})*'
    names = "|".join(_regex_escape(json.dumps(t.name, ensure_ascii=False)[1:-1]) for t in tools)
    colon, comma = [_WS_REGEX, ":", _WS_REGEX], [_WS_REGEX, ",", _WS_REGEX]
    after_name = _any_prefix([*comma, f'"{args_key}"', *colon, "{", _WS_REGEX])
    opens = "|".join(s.open_regex for s in shapes)
    head = f'\\{{{_WS_REGEX}"name"{_WS_REGEX}:{_WS_REGEX}"(?:{names})"'
    return LazyGrammar(b.render(root), (f"((?:{opens}){head}{after_name})$",))
