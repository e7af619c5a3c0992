"""Validation: one compiled schema per tool, a fast check for the valid case, ``jsonschema`` for the verdict.

Most calls are already valid, so the hot path is a check compiled once per schema from the keywords
tool schemas use (``type``, ``properties``, ``required``, string ``enum``, bounds, ``items``, local
``$ref``, ``anyOf``). It is deliberately stricter than JSON Schema: it only ever answers "valid and
nothing to repair"; any doubt (an unknown key, ``5.0`` for an integer, an unsupported keyword) sends
the call down the repair walk, and the final verdict comes from a ``jsonschema`` validator (Draft 2020-12
unless the schema's ``$schema`` names another), built the first time a call needs it.

Both live in one :class:`Compiled` per distinct schema, and this module's cache is the only place they are
kept: the parser, the dispatcher and the proxy all ask :func:`compiled`. A call the parser accepted carries
a :class:`~tooldispatch.types.Checked` stamp (:func:`stamp`) so that the dispatcher need not validate it again.
"""

from __future__ import annotations

import itertools
import json
import marshal
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import jsonschema
from jsonschema.exceptions import SchemaError, ValidationError, best_match

from tooldispatch.errors import InvalidSchema
from tooldispatch.repair.types import resolve_ref
from tooldispatch.types import Checked

Check = Callable[[Any], bool]

_MAX_GATHERED: Final = 100  # validation errors read before the most telling ones are picked
_CACHE_LIMIT: Final = 1024
_MARSHAL_VERSION: Final = 2  # every value written in full, no back-references: equal calls, equal bytes

_ANNOTATIONS: Final = frozenset(
    {"title", "description", "default", "examples", "$comment", "deprecated", "readOnly", "writeOnly", "format"}
)
_CONTAINERS: Final = frozenset({"$defs", "definitions", "$schema"})
_MAX_COMPILE_DEPTH: Final = 24
_REQUIRED: Final = re.compile(r"^'(.+)' is a required property$")


class Compiled:
    """One schema, compiled once: the fast check of the valid case and the ``jsonschema`` validator.

    Attributes:
        schema: the schema as first given (later equal schemas share this object).
        check: the compiled "valid and nothing to repair" check, or ``None`` when the schema uses a keyword it
            does not cover (then every call goes to the validator).
    """

    schema: Mapping[str, Any]
    check: Check | None
    _validator: jsonschema.protocols.Validator | None

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        self.check = _compile(schema, schema, 0)
        self._validator = None

    def validator(self, *, tool: str = "") -> jsonschema.protocols.Validator:
        """The ``jsonschema`` validator, built (and the schema checked) the first time it is asked for.

        Args:
            tool: the name of the tool asking, for the message when the schema is invalid.

        Raises:
            ConfigError: the schema itself is not a valid JSON Schema.
        """
        if self._validator is None:
            cls = jsonschema.validators.validator_for(self.schema, default=jsonschema.Draft202012Validator)
            try:
                cls.check_schema(dict(self.schema))
            except SchemaError as exc:
                raise InvalidSchema(
                    f"tool {tool!r} has an invalid parameters schema: {exc.message}; fix the tool declaration",
                    path="/" + "/".join(str(p) for p in exc.path),
                    detail=str(exc.message),
                ) from exc
            self._validator = cls(self.schema)
        return self._validator

    def accepts(self, arguments: Any, *, tool: str = "") -> bool:
        """Whether ``arguments`` satisfy the schema (the fast check first, the validator when it is not sure).

        Args:
            arguments: the call's arguments.
            tool: the name of the tool asking, for the message when the schema is invalid.

        Raises:
            ConfigError: the schema itself is not a valid JSON Schema.
        """
        check = self.check
        if check is not None and check(arguments):
            return True
        return bool(self.validator(tool=tool).is_valid(arguments))


# The cache of compiled schemas, by content: a caller that rebuilds equal tool declarations every turn still
# compiles once. Found first by the identity of the schema object (the hot path: no key to build); an identity
# entry holds its schema, so an id is never reused while it is cached. A pure cache of immutable results.
_compiled: dict[str, Compiled] = {}
_by_identity: dict[int, tuple[Mapping[str, Any], Compiled]] = {}


def compiled(schema: Mapping[str, Any]) -> Compiled:
    """The compiled form of a tool's parameters schema: one per distinct schema, kept in one cache."""
    hit = _by_identity.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    key = _content_key(schema)
    found = _compiled.get(key)
    if found is None:
        if len(_compiled) >= _CACHE_LIMIT:
            _compiled.clear()
            _by_identity.clear()
        found = _compiled[key] = Compiled(schema)
    if len(_by_identity) >= _CACHE_LIMIT:
        _by_identity.clear()
    _by_identity[id(schema)] = (schema, found)
    return found


def validator_for(schema: Mapping[str, Any], *, tool: str = "") -> jsonschema.protocols.Validator:
    """Return the ``jsonschema`` validator of a schema (:meth:`Compiled.validator`).

    Raises:
        ConfigError: the schema itself is not a valid JSON Schema.
    """
    return compiled(schema).validator(tool=tool)


def fast_check(schema: Mapping[str, Any]) -> Check | None:
    """Return the compiled "valid and nothing to repair" check for a schema, or ``None`` if it has none."""
    return compiled(schema).check


def stamp(schema: Mapping[str, Any], arguments: Any) -> Checked | None:
    """The stamp of arguments that satisfy ``schema`` as they are now (``None`` when they cannot be stamped).

    The caller has checked them; the stamp holds the schema and the arguments written with ``marshal``,
    which tells ``True`` from ``1`` and ``1`` from ``1.0``, so any later change shows.
    """
    try:
        return Checked(schema, marshal.dumps(arguments, _MARSHAL_VERSION))
    except ValueError:  # a value marshal cannot write (not JSON): nothing to vouch for
        return None


def still_valid(checked: Checked | None, schema: Mapping[str, Any], arguments: Any) -> bool:
    """Whether ``checked`` vouches for ``arguments`` against ``schema``: stamped against it (or an equal schema),
    and unchanged since."""
    if checked is None:
        return False
    if checked.schema is not schema and compiled(checked.schema) is not compiled(schema):
        return False
    try:
        return marshal.dumps(arguments, _MARSHAL_VERSION) == checked.arguments
    except ValueError:
        return False


def _content_key(schema: Mapping[str, Any]) -> str:
    # Keys in their written order: jsonschema reports the errors at one place in the order the schema lists its
    # keywords, so equal schemas written in another order keep entries of their own.
    try:
        return json.dumps(schema if type(schema) is dict else dict(schema), default=repr)
    except (TypeError, ValueError, RecursionError):
        return f"id:{id(schema)}"


def _is_number(value: Any) -> bool:
    return type(value) is int or (type(value) is float and math.isfinite(value))


def _finite(value: Any) -> bool:
    """True when no float in ``value`` is NaN or infinite (JSON holds neither: ``1e400`` reads as infinity)."""
    kind = type(value)
    if kind is float:
        return math.isfinite(value)
    if kind is not dict and kind is not list:
        return True
    stack = [value]
    while stack:
        item = stack.pop()
        for child in item.values() if type(item) is dict else item:
            kind = type(child)
            if kind is float:
                if not math.isfinite(child):
                    return False
            elif kind is dict or kind is list:
                stack.append(child)
    return True


# A value a schema leaves open (no type, or an object or array with nothing said of its members) is still JSON.
_TYPE_CHECKS: Final[dict[str, Check]] = {
    "string": lambda v: type(v) is str,
    "integer": lambda v: type(v) is int,
    "number": _is_number,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
    "object": lambda v: type(v) is dict and _finite(v),
    "array": lambda v: type(v) is list and _finite(v),
}


def _compile(schema: Any, root: Mapping[str, Any], depth: int) -> Check | None:
    if depth > _MAX_COMPILE_DEPTH:
        return None
    if schema is True:
        return _finite
    if not isinstance(schema, Mapping):
        return None
    keywords = set(schema) - _ANNOTATIONS - _CONTAINERS
    if "$ref" in keywords:
        if keywords != {"$ref"}:
            return None
        target = resolve_ref(schema, root)
        return None if target is schema else _compile(target, root, depth + 1)
    if schema.get("type") == "object" and "properties" in keywords:
        # One check for the object and its properties (the type test is the properties check's first step).
        keywords = keywords - {"type", "properties"}
        whole = _object_check(schema, root, depth, strict_type=True)
        if whole is None:
            return None
        checks: list[Check] = [whole]
    else:
        checks = []
    for keyword in keywords:
        built = _keyword(keyword, schema, root, depth)
        if built is None:
            return None
        if built is not _always:
            checks.append(built)
    return _all_of(checks)


def _always(value: Any) -> bool:
    return True


def _all_of(checks: list[Check]) -> Check:
    """One check that passes when every check passes (written out: a generator per call costs more)."""
    if not checks:
        return _finite  # nothing constrains the value
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda v: first(v) and second(v)
    ready = tuple(checks)

    def check_all(v: Any) -> bool:
        for check in ready:  # noqa: SIM110 - a loop, not all() over a generator: this runs per call
            if not check(v):
                return False
        return True

    return check_all


def _keyword(keyword: str, schema: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> Check | None:
    value = schema[keyword]
    if keyword == "type":
        return _type_check(value)
    if keyword == "enum":
        if not isinstance(value, list) or not all(isinstance(o, str) for o in value):
            return None
        options = frozenset(value)
        return lambda v: type(v) is str and v in options
    if keyword in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return _bound_check(keyword, value)
    if keyword in ("minLength", "maxLength", "minItems", "maxItems"):
        return _length_check(keyword, value)
    if keyword == "properties":
        return _object_check(schema, root, depth)
    if keyword in ("required", "additionalProperties"):
        # Handled by the properties check, which rejects every undeclared key; without properties the
        # object check still needs them.
        return _object_check(schema, root, depth) if "properties" not in schema else _always
    if keyword == "items":
        item = _compile(value, root, depth + 1)
        if item is None:
            return None
        return lambda v: type(v) is not list or all(item(x) for x in v)
    if keyword == "anyOf":
        if not isinstance(value, list) or not value:
            return None
        branches = [_compile(b, root, depth + 1) for b in value]
        if any(b is None for b in branches):
            return None
        ready = [b for b in branches if b is not None]
        return lambda v: any(b(v) for b in ready)
    return None


def _type_check(value: Any) -> Check | None:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(n in _TYPE_CHECKS for n in names):
        return None
    checks = [_TYPE_CHECKS[n] for n in names]
    if len(checks) == 1:
        return checks[0]
    return lambda v: any(c(v) for c in checks)


def _bound_check(keyword: str, bound: Any) -> Check | None:
    if not _is_number(bound):
        return None
    compare: dict[str, Callable[[Any], bool]] = {
        "minimum": lambda v: v >= bound,
        "maximum": lambda v: v <= bound,
        "exclusiveMinimum": lambda v: v > bound,
        "exclusiveMaximum": lambda v: v < bound,
    }
    test = compare[keyword]
    return lambda v: not _is_number(v) or bool(test(v))


def _length_check(keyword: str, bound: Any) -> Check | None:
    if type(bound) is not int:
        return None
    kind = str if keyword.endswith("Length") else list
    if keyword.startswith("min"):
        return lambda v: type(v) is not kind or len(v) >= bound
    return lambda v: type(v) is not kind or len(v) <= bound


def _object_check(
    schema: Mapping[str, Any], root: Mapping[str, Any], depth: int, *, strict_type: bool = False
) -> Check | None:
    """The properties, required and additionalProperties check; with ``strict_type`` a non-object fails it."""
    props = schema.get("properties", {})
    required = schema.get("required", [])
    if not isinstance(props, Mapping) or not isinstance(required, list):
        return None
    compiled: dict[str, Check] = {}
    for name, sub in props.items():
        check = _compile(sub, root, depth + 1)
        if check is None:
            return None
        compiled[name] = check
    needed = tuple(required)

    def check_object(v: Any) -> bool:
        if type(v) is not dict:
            return not strict_type
        for name in needed:
            if name not in v:
                return False
        for key, item in v.items():
            sub = compiled.get(key)
            if sub is None or not sub(item):
                return False
        return True

    return check_object


def _render(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _pointer(parts: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _message(error: ValidationError) -> str:
    where = _pointer(error.absolute_path) or "/"
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    kind = error.validator
    if kind == "required":
        props = schema.get("properties")
        found = _REQUIRED.match(error.message)
        missing = found.group(1) if found else error.message
        known = f"; declared: {', '.join(props)}" if isinstance(props, Mapping) and props else ""
        return f"{where}: missing required argument {json.dumps(missing)}{known}"
    if kind == "enum":
        options = error.validator_value if isinstance(error.validator_value, list) else []
        allowed = ", ".join(_render(o) for o in options)
        return f"{where}: {_render(error.instance)} is not an allowed value; allowed: {allowed}"
    if kind == "type":
        expected = error.validator_value
        expected_text = " or ".join(expected) if isinstance(expected, list) else str(expected)
        return f"{where}: expected {expected_text}, got {_render(error.instance)}"
    if kind == "additionalProperties":
        props = schema.get("properties")
        known = ", ".join(props) if isinstance(props, Mapping) and props else "none"
        given = error.instance if isinstance(error.instance, Mapping) else {}
        extra = sorted(k for k in given if not isinstance(props, Mapping) or k not in props)
        unknown = ", ".join(json.dumps(k) for k in extra)
        return f"{where}: unknown argument(s) {unknown}; declared: {known}"
    return f"{where}: {_render(error.instance)} is invalid: {error.message}"


def schema_errors(
    arguments: Any, schema: Mapping[str, Any], *, tool: str = "", limit: int = 5
) -> list[tuple[str, str]]:
    """Validate ``arguments`` against ``schema`` with ``jsonschema``.

    Returns:
        Up to ``limit`` errors, most relevant first, each as ``(json_pointer, message)``; empty when valid.

    Raises:
        ConfigError: the schema itself is invalid.
    """
    validator = validator_for(schema, tool=tool)
    # jsonschema visits some keys in set order, which changes from one process to the next: the errors are
    # gathered first and given in the order of the argument they concern, as the model wrote them.
    found: list[tuple[tuple[int, ...], str, str]] = []
    try:
        for error in itertools.islice(validator.iter_errors(arguments), _MAX_GATHERED):
            specific = best_match([error]) or error
            entry = (
                _written_at(arguments, specific.absolute_path),
                _pointer(specific.absolute_path),
                _message(specific),
            )
            if entry not in found:
                found.append(entry)
    except RecursionError:
        return [("/", "/: the arguments are nested too deeply to validate")]
    for path, number in _non_finite(arguments):
        # JSON has no NaN or infinity (``1e400`` reads as infinity): no tool can be given one.
        pointer = _pointer(path)
        message = f"{pointer}: {number} is not a finite number; send a number JSON can hold"
        found.append((_written_at(arguments, path), pointer, message))
    found.sort(key=lambda entry: entry[0])  # stable: errors at one place keep the validator's order
    return [(pointer, message) for _, pointer, message in found[:limit]]


def _non_finite(arguments: Any) -> list[tuple[list[Any], float]]:
    """The NaN and infinite floats in ``arguments`` with their paths, in the order written (iterative, bounded)."""
    found: list[tuple[list[Any], float]] = []
    stack: list[tuple[Any, list[Any]]] = [(arguments, [])]
    while stack and len(found) < _MAX_GATHERED:
        value, path = stack.pop()
        if type(value) is float:
            if not math.isfinite(value):
                found.append((path, value))
        elif isinstance(value, dict):
            children: list[tuple[Any, list[Any]]] = []
            for key, item in value.items():
                children.append((item, [*path, key]))
            stack.extend(reversed(children))  # popped in the order written
        elif isinstance(value, list):
            for i in range(len(value) - 1, -1, -1):
                stack.append((value[i], [*path, i]))
    return found


def _written_at(value: Any, path: Iterable[Any]) -> tuple[int, ...]:
    """Where a path points in the arguments as written: the position of each key or item along it."""
    at: list[int] = []
    for part in path:
        if isinstance(value, dict) and part in value:
            at.append(list(value).index(part))
            value = value[part]
        elif isinstance(value, list) and isinstance(part, int) and 0 <= part < len(value):
            at.append(part)
            value = value[part]
        else:
            at.append(-1)
            break
    return tuple(at)
