"""Tool declarations as the parser sees them: a name, a description and a JSON Schema.

Accepts the OpenAI tools list (``{"type": "function", "function": {...}}``), bare function dicts
(``{"name": ..., "parameters": ...}``) and ``ToolSpec`` values, so every layer normalizes once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tooldispatch.errors import ConfigError
from tooldispatch.types import RepairLevel


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One declared tool.

    Attributes:
        name: the tool name the model must use.
        description: what the tool does, as shown to the model.
        parameters: the JSON Schema of the arguments object.
        repair: how much the parser may repair a call to this tool, and where it may find one: ``bounded``
            (read-only tools: near-match repairs, and a call recovered from running text), ``lossless`` or
            ``none`` (side-effecting tools: lossless repairs only, and only calls in a delimited form).
            ``Registry.specs()`` fills it from the tool's metadata. A declaration given as a dict says nothing
            about side effects, so it gets ``lossless``: what is not declared read-only is treated as
            side-effecting (a policy file declares such tools: ``tooldispatch.policy``).
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})
    repair: RepairLevel = "lossless"

    @property
    def properties(self) -> Mapping[str, Any]:
        """The schema's ``properties`` (empty when the schema has none)."""
        props = self.parameters.get("properties")
        return props if type(props) is dict or isinstance(props, Mapping) else {}  # a dict skips the ABC check

    @property
    def required(self) -> frozenset[str]:
        """Names of required arguments."""
        req = self.parameters.get("required")
        return frozenset(r for r in req if isinstance(r, str)) if isinstance(req, list) else frozenset()

    def to_openai(self) -> dict[str, Any]:
        """Return the OpenAI tools-list entry for this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


ToolsInput = Iterable[Mapping[str, Any] | ToolSpec] | Mapping[str, ToolSpec] | None
"""Any form of tool declarations that ``normalize_tools`` accepts."""


def _spec_from_mapping(item: Mapping[str, Any]) -> ToolSpec:
    fn = item.get("function") if item.get("type") == "function" or "function" in item else item
    if not isinstance(fn, Mapping):
        raise ConfigError(f"a tool entry has a 'function' that is not an object: {item!r:.200}")
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(
            f"a tool entry has no name: {item!r:.200}; give each tool "
            '{"type": "function", "function": {"name": ..., "parameters": {...}}}'
        )
    params = fn.get("parameters")
    if params is None:
        params = {"type": "object", "properties": {}}
    if not isinstance(params, Mapping):
        raise ConfigError(f"tool {name!r}: 'parameters' must be a JSON Schema object, got {type(params).__name__}")
    declared = params.get("type")
    if declared is not None and "object" not in (declared if isinstance(declared, list) else [declared]):
        raise ConfigError(
            f'tool {name!r}: \'parameters\' must describe an object ("type": "object"), not {declared!r}: a call\'s '
            "arguments are always a JSON object"
        )
    description = fn.get("description") or ""
    return ToolSpec(name=name, description=str(description), parameters=params)


def normalize_tools(tools: ToolsInput) -> dict[str, ToolSpec]:
    """Turn any accepted tools form into ``{name: ToolSpec}``, keeping declaration order.

    Raises:
        ConfigError: the tools are not a list of declarations (or a mapping of names to ``ToolSpec``), or an
            entry has no name or a parameters value that is not an object.
    """
    if tools is None:
        return {}
    if type(tools) is dict or isinstance(tools, Mapping):  # a dict skips the ABC's check, which costs more
        for name, spec in tools.items():
            if not isinstance(spec, ToolSpec):
                raise ConfigError(
                    f"tools given as a mapping must map names to ToolSpec, but {name!r} maps to "
                    f'{type(spec).__name__}; pass the OpenAI tools list ([{{"type": "function", "function": '
                    "{...}}, ...]) instead"
                )
        return dict(tools)
    if isinstance(tools, str | bytes) or not isinstance(tools, Iterable):
        raise ConfigError(f"tools must be a list of tool declarations, not {type(tools).__name__}")
    out: dict[str, ToolSpec] = {}
    for item in tools:
        if isinstance(item, ToolSpec):
            spec = item
        elif type(item) is dict or isinstance(item, Mapping):
            spec = _spec_from_mapping(item)
        else:
            raise ConfigError(f"a tool entry must be an object or a ToolSpec, not {type(item).__name__}: {item!r:.80}")
        out[spec.name] = spec
    return out
