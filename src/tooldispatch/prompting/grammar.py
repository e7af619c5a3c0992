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
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from tooldispatch.errors import ConfigError
from tooldispatch.models.manifest import Reasoning
from tooldispatch.prompting.formats import FORMATS, _py_literal
from tooldispatch.toolspec import ToolSpec

Dialect = Literal["json", "python"]

# The first character of a call in each format (escaped for a GBNF character class): answer text under
# ``tool_choice="auto"`` never contains it, so writing it starts the call.
_CALL_START: Mapping[str, str] = {
    "hermes": "<",
    "hermes_list": "<",
    "json": "{",
    "pythonic": "\\[",
    "gemma_tool_code": "`",
}

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
_PRIMITIVE_ORDER = ("value", "object", "array", "string", "char", "number", "integer", "boolean", "null")


def gbnf_literal(text: str) -> str:
    """Quote text as a GBNF string literal."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return '"' + escaped.replace("\t", "\\t") + '"'


def _rule_name(text: str) -> str:
    name = re.sub(r"[^a-zA-Z0-9]+", "-", text).strip("-").lower()
    return name or "x"


class _Builder:
    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.rules: dict[str, str] = {}
        self.primitives: set[str] = set()

    def use(self, primitive: str) -> str:
        if primitive not in self.primitives:
            self.primitives.add(primitive)
            for dep in _DEPENDS.get(primitive, ()):
                self.use(dep)
        return primitive

    def add(self, base: str, body: str) -> str:
        name, n = base, 2
        while name in self.rules or name in _PRIMITIVES or name in ("root", "boolean", "null"):
            name, n = f"{base}{n}", n + 1
        self.rules[name] = body
        return name

    def const(self, value: Any) -> str:
        text = _py_literal(value) if self.dialect == "python" else json.dumps(value, ensure_ascii=False)
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
            more = f'{item} (", " {item})*'
            min_items = schema.get("minItems", 0)
            body = f'"[" {more} "]"' if isinstance(min_items, int) and min_items > 0 else f'"[" ({more})? "]"'
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

        def member(key: str) -> str:
            value = self.value(props.get(key), f"{name}-{_rule_name(key)}")
            label = json.dumps(key, ensure_ascii=False) + ": " if json_keys else f"{key}="
            return f"{gbnf_literal(label)} {value}"

        req = [member(k) for k in required]
        opt = [member(k) for k in optional]
        if req:
            body = " ".join([req[0], *(f'", " {r}' for r in req[1:]), *(f'(", " {o})?' for o in opt)])
        elif opt:
            alts = [" ".join([o, *(f'(", " {p})?' for p in opt[i + 1 :])]) for i, o in enumerate(opt)]
            body = "(" + " | ".join(alts) + ")?"
        else:
            return f"{gbnf_literal(open_ + close)}"
        return f"{gbnf_literal(open_)} {body} {gbnf_literal(close)}"

    def render(self, root: str) -> str:
        lines = [f"root ::= {root}"]
        lines += [f"{k} ::= {v}" for k, v in self.rules.items()]
        prim = dict(_PRIMITIVES)
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
    if tool_format in ("pythonic", "gemma_tool_code"):
        b = _Builder("python")
        call = _python_calls(b, chosen)
        root = f'"[" {call} (", " {call})* "]"' if tool_format == "pythonic" else f'"```tool_code\\n" {call} "\\n```"'
    else:
        b = _Builder("json")
        call = _json_calls(b, chosen, FORMATS[tool_format].arguments_key)
        if tool_format == "hermes":
            root = f'"<tool_call>\\n" {call} "\\n</tool_call>"'
        elif tool_format == "hermes_list":
            root = f'"<tool_call>[" {call} (", " {call})* "]</tool_call>"'
        else:
            root = call
    if tool_choice == "auto":
        calls = b.add("tool-calls", root)
        answer = b.add("answer", f"[^{_CALL_START[tool_format]}]+")
        root = f"{calls} | {answer} {calls}?"
    if reasoning is not None:
        body = b.add("tool-calls" if tool_choice != "auto" else "turn", root)
        close = f"{gbnf_literal(reasoning.close)} [ \\n]*"
        if reasoning.starts_open:
            root = f"{b.add('think', f'[^<]* {close}')} {body}"
        else:
            root = f"{b.add('think', f'{gbnf_literal(reasoning.open)} [^<]* {close}')}? {body}"
    return b.render(root)
