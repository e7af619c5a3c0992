"""The tool registry: each tool's function, schema and execution properties.

Execution properties are tri-state. ``None`` means undeclared and takes the conservative path:

- ``read_only=None``: treated as side-effecting (idempotency keys, no retry once it started).
- ``concurrency_safe=None``: never run in parallel with other calls.
- ``destructive=None``: not assumed destructive, but also never read-only.
- ``requires_approval=None``: approval is required when the tool is declared destructive and has no
  ``compensate`` inverse (nothing would undo it); ``False`` bypasses approval explicitly.
- ``requires_fresh_state``: the named state is assumed stale until a ``refreshes=`` tool succeeded.

Registration refuses what cannot be dispatched safely (each ``RegistrationError`` says what to change):
contradictory properties (read-only and destructive, read-only with a compensation or idempotency
fields or ``acts_on``), quota or idempotency fields that are not parameters, a quota ``per`` field or an
``acts_on`` field that is not required, process isolation for a function a child process cannot import,
non-positive timeouts, schemas that are not valid JSON Schema objects, and duplicate or malformed names.
References between tools (``compensate`` and its ``acts_on``, ``requires_fresh_state``) are checked by
``Registry.check`` when a ``Dispatcher`` is built.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeVar, overload

import jsonschema

from tooldispatch.dispatch.poisoning import scan_tool
from tooldispatch.dispatch.schema import derive_schema, parse_docstring
from tooldispatch.errors import RegistrationError
from tooldispatch.toolspec import ToolSpec
from tooldispatch.types import RepairLevel

F = TypeVar("F", bound=Callable[..., Any])
Isolation = Literal["thread", "process"]
ExtraArguments = Literal["forbid", "ignore"]
"""What an undeclared argument key does: refuse the call, or let an opted-in caller drop it."""
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True, slots=True)
class Quota:
    """At most ``limit`` invocations per session (``per=None``) or per value of the argument ``per``."""

    limit: int
    per: str | None = None


@dataclass(frozen=True, slots=True)
class FreshState:
    """The named state must have been refreshed in this session within ``max_age_s`` seconds."""

    resource: str
    max_age_s: float


@dataclass(frozen=True, slots=True)
class ToolDef:
    """One registered tool.

    Attributes:
        name: the name the model calls.
        fn: the function (sync or async) called with the arguments as keywords.
        description: shown to the model.
        schema: JSON Schema of the arguments object.
        version: the tool's version as declared (``"0"`` when not given).
        source: where the tool comes from (``module:qualname`` by default).
        description_sha256: hash of the description, pinned in the store per (name, version).
        read_only: no side effects (tri-state, see the module docstring).
        concurrency_safe: may run in parallel with other concurrency-safe read-only calls.
        destructive: its side effect destroys or overwrites something.
        requires_approval: a person must approve each call.
        requires_fresh_state: state that must be fresh before the call.
        refreshes: the state that a successful call refreshes.
        quota: an invocation limit.
        compensate: name of the inverse tool (saga).
        idempotency_fields: the arguments that identify the side effect (``None``: all arguments).
        acts_on: the arguments naming the thing the side effect changes (``None``: derived from ``compensate``,
            see ``saga.resource_of``); the same argument name means the same kind of thing in every tool.
        idempotency_ttl_s: how long an idempotency record is kept.
        timeout_s: the per-call budget, measured from invocation.
        max_attempts: attempts including the first (retries only where the retry policy allows).
        result_max_chars: results longer than this are bounded (head + tail).
        isolation: ``thread`` (sync tools in a worker thread) or ``process`` (a child killed at the deadline).
        repair: repair strength applied to this tool's calls.
        extra_arguments: ``forbid`` (an undeclared argument key refuses the call) or ``ignore`` (the tool's
            effect is fully set by its declared arguments, so a caller that opts in, ``Agent(drop_extra_arguments=
            True)``, may drop undeclared keys and run the call, traced).
        cost: a declared cost per call, for reports.
        sensitive_fields: arguments whose values are masked in traces.
        poisoning: findings of the description scan (empty when clean).
    """

    name: str
    fn: Callable[..., Any]
    description: str
    schema: Mapping[str, Any]
    version: str = "0"
    source: str = ""
    description_sha256: str = ""
    read_only: bool | None = None
    concurrency_safe: bool | None = None
    destructive: bool | None = None
    requires_approval: bool | None = None
    requires_fresh_state: FreshState | None = None
    refreshes: str | None = None
    quota: Quota | None = None
    compensate: str | None = None
    idempotency_fields: tuple[str, ...] | None = None
    acts_on: tuple[str, ...] | None = None
    idempotency_ttl_s: float = 3600.0
    timeout_s: float = 30.0
    max_attempts: int = 2
    result_max_chars: int = 8000
    isolation: Isolation = "thread"
    repair: RepairLevel = "lossless"
    extra_arguments: ExtraArguments = "forbid"
    cost: float | None = None
    sensitive_fields: frozenset[str] = field(default_factory=frozenset)
    poisoning: tuple[str, ...] = ()

    @property
    def side_effecting(self) -> bool:
        """True unless the tool is declared read-only."""
        return self.read_only is not True

    @property
    def parallel_safe(self) -> bool:
        """True when the tool may run in parallel: read-only and concurrency-safe, both declared."""
        return self.read_only is True and self.concurrency_safe is True

    @property
    def needs_approval(self) -> bool:
        """True when each call must be approved (see the module docstring for the undeclared case)."""
        if self.requires_approval is not None:
            return self.requires_approval
        return self.destructive is True and self.compensate is None

    @property
    def is_async(self) -> bool:
        """True for ``async def`` tools."""
        return inspect.iscoroutinefunction(self.fn)

    @property
    def required(self) -> frozenset[str]:
        """Names of required arguments."""
        req = self.schema.get("required")
        return frozenset(r for r in req if isinstance(r, str)) if isinstance(req, list) else frozenset()

    @property
    def properties(self) -> Mapping[str, Any]:
        """The schema's ``properties``."""
        props = self.schema.get("properties")
        return props if isinstance(props, Mapping) else {}

    def spec(self) -> ToolSpec:
        """Return the declaration the parser and the model see."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.schema, repair=self.repair)


def description_hash(description: str, schema: Mapping[str, Any]) -> str:
    """sha256 of what the model is shown: the description and the parameter schema."""
    blob = json.dumps({"description": description, "schema": schema}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class Registry:
    """Tools by name, with their schemas and execution properties.

    Args:
        reject_poisoned: refuse tools whose description is flagged (default: register and warn).

    Attributes:
        warnings: human-readable findings (poisoned descriptions), in registration order.
    """

    def __init__(self, *, reject_poisoned: bool = False) -> None:
        self._tools: dict[str, ToolDef] = {}
        self.reject_poisoned = reject_poisoned
        self.warnings: list[str] = []

    @overload
    def tool(self, name: F, /) -> F: ...

    @overload
    def tool(self, name: str | None = None, /, **options: Any) -> Callable[[F], F]: ...

    def tool(self, name: str | F | None = None, /, **options: Any) -> F | Callable[[F], F]:
        """Decorator form of ``register``; the function is returned unchanged.

        Use it bare (``@reg.tool``) or with options (``@reg.tool(read_only=True)``, ``@reg.tool("name")``).

        Args:
            name: the tool name (default: the function's name).
            **options: any keyword of ``register``.
        """
        if callable(name):
            self.register(name.__name__, name)
            return name

        def decorate(fn: F) -> F:
            self.register(name or fn.__name__, fn, **options)
            return fn

        return decorate

    def register(
        self,
        name: str,
        fn: Callable[..., Any],
        *,
        schema: Mapping[str, Any] | None = None,
        description: str | None = None,
        version: str = "0",
        source: str | None = None,
        read_only: bool | None = None,
        concurrency_safe: bool | None = None,
        destructive: bool | None = None,
        requires_approval: bool | None = None,
        requires_fresh_state: Mapping[str, Any] | FreshState | None = None,
        refreshes: str | None = None,
        quota: Mapping[str, Any] | Quota | None = None,
        compensate: str | None = None,
        idempotency_fields: Sequence[str] | None = None,
        acts_on: Sequence[str] | None = None,
        idempotency_ttl_s: float = 3600.0,
        timeout_s: float = 30.0,
        max_attempts: int = 2,
        result_max_chars: int = 8000,
        isolation: Isolation = "thread",
        repair: RepairLevel | None = None,
        extra_arguments: ExtraArguments = "forbid",
        cost: float | None = None,
        sensitive_fields: Sequence[str] = (),
    ) -> ToolDef:
        """Register a tool.

        Args:
            name: the name the model calls.
            fn: the function; called with the validated arguments as keywords.
            schema: JSON Schema of the arguments (default: derived from type hints and the docstring). A schema
                that leaves undeclared keys open (no ``additionalProperties``) for a function that takes no
                ``**kwargs`` is closed (``additionalProperties: false``): such a key is refused at validation,
                with the tool's arguments named, instead of raising ``TypeError`` inside the tool.
            description: shown to the model (default: the docstring's text before ``Args:``).
            version: the tool's version; a changed description under the same version is reported.
            source: where the tool comes from (default ``module:qualname``).
            read_only: the tool has no side effects.
            concurrency_safe: may run in parallel with other such read-only calls.
            destructive: the side effect destroys or overwrites something.
            requires_approval: a person must approve each call.
            requires_fresh_state: ``{"resource": ..., "max_age_s": ...}``.
            refreshes: the state a successful call of this tool refreshes.
            quota: ``{"limit": n}`` per session or ``{"limit": n, "per": "<argument>"}`` per resource.
            compensate: the inverse tool, run on rollback with arguments derived from this call.
            idempotency_fields: arguments that identify the side effect (default: all arguments).
            acts_on: required arguments naming the thing the side effect changes (an order's ``order_id``). A
                successful call ends the stored results of earlier calls that acted on the same values, so they
                run again instead of replaying (see ``Dispatcher``). Default: a tool and its ``compensate``
                inverse act on the inverse's identifying arguments.
            idempotency_ttl_s: lifetime of idempotency records.
            timeout_s: per-call budget from invocation.
            max_attempts: attempts including the first.
            result_max_chars: bound on the result the model sees.
            isolation: ``thread`` or ``process``.
            repair: ``lossless``, ``bounded`` or ``none`` (default: ``bounded`` for read-only tools,
                ``lossless`` otherwise).
            extra_arguments: ``forbid`` (default) or ``ignore``: undeclared argument keys may be dropped by a
                caller that opts in (``Agent(drop_extra_arguments=True)``), as pydantic's ``extra="ignore"``.
            cost: declared cost per call.
            sensitive_fields: arguments masked in traces.

        Returns:
            The registered ``ToolDef``.

        Raises:
            RegistrationError: the declaration cannot be dispatched safely; the message says what to change.
        """
        where = f"tool {name!r}"
        if not isinstance(name, str) or not _NAME.match(name):
            raise RegistrationError(f"{where}: names are 1-64 characters of letters, digits, '_', '.', '-'")
        if name in self._tools:
            raise RegistrationError(f"{where} is already registered; give it another name or a new Registry")
        if not callable(fn):
            raise RegistrationError(f"{where}: fn must be callable, got {type(fn).__name__}")
        doc_description, derived = ("", {}) if schema is not None else derive_schema(fn, name)
        final_schema = dict(schema) if schema is not None else derived
        open_keys = schema is not None and "properties" in final_schema and "additionalProperties" not in final_schema
        if open_keys and not _takes_any_keyword(fn):  # an undeclared key could only make the call raise TypeError
            final_schema["additionalProperties"] = False
        if description is None:
            description = doc_description if schema is None else _doc_summary(fn)
        _check_schema(where, final_schema)
        fresh = _fresh(where, requires_fresh_state)
        quota_def = _quota(where, quota)
        ident = tuple(idempotency_fields) if idempotency_fields is not None else None
        acted = tuple(acts_on) if acts_on is not None else None
        props = final_schema.get("properties") or {}
        required = set(final_schema.get("required") or [])
        if read_only is True and destructive is True:
            raise RegistrationError(f"{where}: read_only=True and destructive=True contradict; drop one")
        if read_only is True and compensate is not None:
            raise RegistrationError(f"{where}: a read-only tool has nothing to compensate; drop compensate=")
        if read_only is True and ident is not None:
            raise RegistrationError(f"{where}: read-only tools need no idempotency; drop idempotency_fields=")
        if ident is not None:
            if not ident:
                raise RegistrationError(f"{where}: idempotency_fields is empty; omit it to key on all arguments")
            unknown = [f for f in ident if f not in props]
            if unknown:
                raise RegistrationError(f"{where}: idempotency_fields {unknown} are not parameters of the schema")
        if acted is not None:
            if read_only is True:
                raise RegistrationError(f"{where}: a read-only tool changes nothing; drop acts_on=")
            if not acted:
                raise RegistrationError(f"{where}: acts_on is empty; omit it when the tool names no such thing")
            loose = [f for f in acted if f not in required]
            if loose:
                raise RegistrationError(
                    f"{where}: acts_on {loose} must be required parameters of the schema, else a call without "
                    "them would act on nothing known"
                )
        if quota_def is not None and quota_def.per is not None:
            if quota_def.per not in props:
                raise RegistrationError(f"{where}: quota per={quota_def.per!r} is not a parameter of the schema")
            if quota_def.per not in required:
                raise RegistrationError(
                    f"{where}: quota per={quota_def.per!r} must be a required parameter, else calls without it "
                    "would escape the quota"
                )
        if timeout_s <= 0 or idempotency_ttl_s <= 0:
            raise RegistrationError(f"{where}: timeout_s and idempotency_ttl_s must be positive")
        if max_attempts < 1:
            raise RegistrationError(f"{where}: max_attempts counts the first attempt and must be at least 1")
        if result_max_chars < 200:
            raise RegistrationError(f"{where}: result_max_chars must be at least 200 to leave room for the marker")
        if isolation not in ("thread", "process"):
            raise RegistrationError(f"{where}: isolation must be 'thread' or 'process', got {isolation!r}")
        if isolation == "process":
            _check_importable(where, fn)
        if repair not in (None, "lossless", "bounded", "none"):
            raise RegistrationError(f"{where}: repair must be 'lossless', 'bounded' or 'none'")
        if extra_arguments not in ("forbid", "ignore"):
            raise RegistrationError(f"{where}: extra_arguments must be 'forbid' or 'ignore', got {extra_arguments!r}")
        repair_level: RepairLevel = repair or ("bounded" if read_only is True else "lossless")
        findings = scan_tool(description, final_schema)
        if findings:
            message = f"{where}: description flagged as possibly poisoned: {'; '.join(findings)}"
            if self.reject_poisoned:
                raise RegistrationError(message + "; fix the description or use Registry(reject_poisoned=False)")
            self.warnings.append(message)
        tool = ToolDef(
            name=name,
            fn=fn,
            description=description,
            schema=MappingProxyType(final_schema),
            version=str(version),
            source=source or f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}",
            description_sha256=description_hash(description, final_schema),
            read_only=read_only,
            concurrency_safe=concurrency_safe,
            destructive=destructive,
            requires_approval=requires_approval,
            requires_fresh_state=fresh,
            refreshes=refreshes,
            quota=quota_def,
            compensate=compensate,
            idempotency_fields=ident,
            acts_on=acted,
            idempotency_ttl_s=float(idempotency_ttl_s),
            timeout_s=float(timeout_s),
            max_attempts=int(max_attempts),
            result_max_chars=int(result_max_chars),
            isolation=isolation,
            repair=repair_level,
            extra_arguments=extra_arguments,
            cost=cost,
            sensitive_fields=frozenset(sensitive_fields),
            poisoning=findings,
        )
        self._tools[name] = tool
        return tool

    def check(self) -> None:
        """Check references between tools: compensations and refreshers must exist.

        Raises:
            RegistrationError: a ``compensate`` tool is missing or read-only, or declares other ``acts_on``
                than the tool it undoes, or no tool ``refreshes`` a state that another tool requires fresh.
        """
        refreshed = {t.refreshes for t in self._tools.values() if t.refreshes}
        for tool in self._tools.values():
            if tool.compensate is not None:
                inverse = self._tools.get(tool.compensate)
                if inverse is None:
                    raise RegistrationError(
                        f"tool {tool.name!r}: compensate={tool.compensate!r} is not registered; register it first"
                    )
                if inverse.read_only is True:
                    raise RegistrationError(f"tool {tool.name!r}: its inverse {inverse.name!r} is read-only")
                if inverse.acts_on != tool.acts_on:
                    raise RegistrationError(
                        f"tool {tool.name!r} acts_on {list(tool.acts_on or [])} but its inverse {inverse.name!r} "
                        f"acts_on {list(inverse.acts_on or [])}; an effect and its undoing act on the same thing, "
                        "so declare the same acts_on on both"
                    )
            fresh = tool.requires_fresh_state
            if fresh is not None and fresh.resource not in refreshed:
                raise RegistrationError(
                    f"tool {tool.name!r} requires fresh {fresh.resource!r} but no tool declares "
                    f"refreshes={fresh.resource!r}; register one or drop requires_fresh_state"
                )

    def get(self, name: str) -> ToolDef | None:
        """Return the tool called ``name``, or None."""
        return self._tools.get(name)

    def __getitem__(self, name: str) -> ToolDef:
        return self._tools[name]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[ToolDef]:
        return iter(list(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)

    @property
    def names(self) -> list[str]:
        """Registered names, in registration order."""
        return list(self._tools)

    def refresher_for(self, resource: str) -> str | None:
        """The first tool that refreshes ``resource``."""
        return next((t.name for t in self._tools.values() if t.refreshes == resource), None)

    def specs(self) -> list[ToolSpec]:
        """Every tool's declaration, for the parser and the prompt."""
        return [t.spec() for t in self._tools.values()]

    def to_openai(self) -> list[dict[str, Any]]:
        """The OpenAI ``tools`` list."""
        return [t.spec().to_openai() for t in self._tools.values()]


def _doc_summary(fn: Callable[..., Any]) -> str:
    return parse_docstring(inspect.getdoc(fn))[0]


def _check_schema(where: str, schema: Mapping[str, Any]) -> None:
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise RegistrationError(f"{where}: schema is not valid JSON Schema: {exc.message}") from exc
    if schema.get("type") != "object":
        raise RegistrationError(f'{where}: the arguments schema must have "type": "object"')


def _takes_any_keyword(fn: Callable[..., Any]) -> bool:
    """True when ``fn`` takes ``**kwargs`` (or its signature cannot be read): only then may a call carry keys
    its schema does not declare. A wrapper made with ``functools.wraps`` is read as the function it wraps."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _fresh(where: str, value: Mapping[str, Any] | FreshState | None) -> FreshState | None:
    if value is None or isinstance(value, FreshState):
        return value
    try:
        fresh = FreshState(resource=str(value["resource"]), max_age_s=float(value["max_age_s"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise RegistrationError(
            f'{where}: requires_fresh_state must be {{"resource": "<name>", "max_age_s": <seconds>}}'
        ) from exc
    if fresh.max_age_s <= 0:
        raise RegistrationError(f"{where}: requires_fresh_state max_age_s must be positive")
    return fresh


def _quota(where: str, value: Mapping[str, Any] | Quota | None) -> Quota | None:
    if value is None or isinstance(value, Quota):
        return value
    unknown = set(value) - {"limit", "per"}
    if unknown or "limit" not in value:
        raise RegistrationError(f'{where}: quota must be {{"limit": <n>}} or {{"limit": <n>, "per": "<argument>"}}')
    limit = value["limit"]
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise RegistrationError(f"{where}: quota limit must be a positive integer")
    per = value.get("per")
    return Quota(limit=limit, per=str(per) if per is not None else None)


def _check_importable(where: str, fn: Callable[..., Any]) -> None:
    if inspect.iscoroutinefunction(fn):
        raise RegistrationError(f"{where}: isolation='process' runs sync functions; make it a plain def")
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or "<" in qualname:
        raise RegistrationError(
            f"{where}: isolation='process' needs a module-level function a child process can import "
            "(not a lambda, closure or method)"
        )
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part, None)
    if target is not fn:
        raise RegistrationError(f"{where}: isolation='process' cannot find {module}:{qualname} by import")
