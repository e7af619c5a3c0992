"""Where tools come from: the demo world, a ``Registry`` in Python, and MCP servers, several at once.

``load_sources(tools=["demo", "my_tools.py:registry", "pkg.mod:make"], mcp=["mcp.json"], store=store)``
merges them into one ``Registry``. Names that two sources share are prefixed by their source
(``<source>__<name>``, said once in ``notes``); a source's own references between its tools
(``compensate=``) follow the rename. A Python target is ``path/to/file.py[:attr]`` or
``package.module:attr`` (``attr`` defaults to ``registry`` for files), naming a ``Registry`` or a callable
with no arguments that returns one. A module that cannot be imported is one ``ConfigError`` line naming
the file, the line and what went wrong.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tooldispatch.dispatch.registry import Registry, ToolDef
from tooldispatch.errors import ConfigError, RegistrationError
from tooldispatch.store import StateStore


@dataclass(slots=True)
class ToolSources:
    """The merged tools, what a person should know about them, and what must be stopped at the end.

    Attributes:
        registry: every tool, under its final name.
        notes: renames, trust decisions, blocked or poisoned tools, log locations (one line each).
        origin: final name → ``(source label, name in that source)``.
        world: the demo world when ``demo`` is among the sources.
        mcp: the MCP servers when any were configured (``tooldispatch.mcp.McpServers``).
    """

    registry: Registry
    notes: list[str] = field(default_factory=list)
    origin: dict[str, tuple[str, str]] = field(default_factory=dict)
    world: Any = None
    mcp: Any = None
    _closers: list[Callable[[], None]] = field(default_factory=list)

    @property
    def tool_loop(self) -> Any:
        """The event loop the MCP tools live on (``Dispatcher(tool_loop=...)``), ``None`` without MCP."""
        return self.mcp.supervisor.loop if self.mcp is not None else None

    def close(self) -> None:
        """Stop MCP servers (each child reaped) and release what the sources hold."""
        for close in reversed(self._closers):
            close()
        self._closers.clear()

    def __enter__(self) -> ToolSources:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def load_sources(
    tools: Sequence[str] = (),
    mcp: Sequence[str | Path] = (),
    *,
    store: StateStore,
    mcp_log_dir: str | Path | None = None,
    demo_world: str | Path = ":memory:",
) -> ToolSources:
    """Load every tool source and merge them into one registry.

    Args:
        tools: ``demo``, ``path/to/file.py[:attr]`` or ``package.module:attr`` targets.
        mcp: ``mcpServers`` JSON files.
        store: the dispatcher's store (MCP pins live there).
        mcp_log_dir: where MCP servers' logs go (default: a new temporary folder, named in ``notes``).
        demo_world: the demo world's SQLite file (seeded when new; kept as it is when not), or ``:memory:``.

    Raises:
        ConfigError: a target cannot be loaded or a config is broken (one line saying which and why).
    """
    parts: list[tuple[str, Registry]] = []
    out = ToolSources(Registry())
    try:
        for target in tools:
            if target == "demo":
                from tooldispatch.tools.demo import DemoWorld, build_registry

                out.world = DemoWorld.seed(demo_world)
                parts.append(("demo", build_registry(out.world)))
            else:
                parts.append((_label(target), load_registry(target)))
        if mcp:
            if importlib.util.find_spec("mcp") is None:
                raise ConfigError("--mcp needs the MCP SDK: pip install 'tooldispatch[mcp]'")
            from tooldispatch.mcp.config import load_config
            from tooldispatch.mcp.source import McpServers

            configs = [server for path in mcp for server in load_config(path)]
            out.mcp = McpServers(configs, store=store, log_dir=mcp_log_dir)
            out._closers.append(out.mcp.close)
            out.notes.extend(out.mcp.notes)
            out.notes.append(f"MCP server logs: {out.mcp.log_dir}")
            parts.extend((name, server.registry) for name, server in out.mcp.servers.items())
        out.registry, out.origin, renamed = merge(parts)
    except BaseException:
        out.close()
        raise
    if renamed:
        out.notes.insert(0, f"tool names found in more than one source are prefixed by their source: {renamed}")
    return out


def merge(parts: Sequence[tuple[str, Registry]]) -> tuple[Registry, dict[str, tuple[str, str]], str]:
    """Merge registries, prefixing names that more than one source has.

    Returns:
        ``(registry, origin, renamed)``: the merged registry, final name → (source, name), and one line listing
        the renames (empty when none).

    Raises:
        ConfigError: two sources have the same label and a shared name.
    """
    if len(parts) == 1:
        label, reg = parts[0]
        return reg, {t.name: (label, t.name) for t in reg}, ""
    counts: dict[str, int] = {}
    for _, reg in parts:
        for name in reg.names:
            counts[name] = counts.get(name, 0) + 1
    merged = Registry()
    origin: dict[str, tuple[str, str]] = {}
    renames: list[str] = []
    for label, reg in parts:
        final = {n: (f"{label}__{n}" if counts[n] > 1 else n) for n in reg.names}
        for tool in reg:
            name = final[tool.name]
            if name in origin:
                raise ConfigError(f"two tool sources are both called {label!r}; give one of them another name")
            try:
                _copy(merged, tool, name, final)
            except RegistrationError as exc:
                raise ConfigError(f"tool source {label!r}: {exc}") from None
            origin[name] = (label, tool.name)
            if name != tool.name:
                renames.append(f"{name} ({label})")
        merged.warnings.extend(w for w in reg.warnings if w not in merged.warnings)
    return merged, origin, ", ".join(renames)


def _copy(into: Registry, tool: ToolDef, name: str, final: dict[str, str]) -> None:
    into.register(
        name,
        tool.fn,
        schema=dict(tool.schema),
        description=tool.description,
        version=tool.version,
        source=tool.source,
        read_only=tool.read_only,
        concurrency_safe=tool.concurrency_safe,
        destructive=tool.destructive,
        requires_approval=tool.requires_approval,
        requires_fresh_state=tool.requires_fresh_state,
        refreshes=tool.refreshes,
        quota=tool.quota,
        compensate=final.get(tool.compensate, tool.compensate) if tool.compensate else None,
        idempotency_fields=tool.idempotency_fields,
        acts_on=tool.acts_on,
        idempotency_ttl_s=tool.idempotency_ttl_s,
        timeout_s=tool.timeout_s,
        max_attempts=tool.max_attempts,
        result_max_chars=tool.result_max_chars,
        isolation=tool.isolation,
        repair=tool.repair,
        cost=tool.cost,
        sensitive_fields=sorted(tool.sensitive_fields),
    )


def _label(target: str) -> str:
    module, _, _ = _split(target)
    if module.endswith(".py"):
        return Path(module).stem
    return module.rpartition(".")[2]


def _split(target: str) -> tuple[str, str, bool]:
    """``(module or file, attr, attr given)``; a Windows drive letter is not an attribute separator."""
    module, sep, attr = target.rpartition(":")
    if not sep or "/" in attr or "\\" in attr or not module or (len(module) == 1 and module.isalpha()):
        return target, "registry", False
    return module, attr, True


def load_registry(target: str) -> Registry:
    """Load a ``Registry`` named ``package.module:attr`` or ``path/to/file.py[:attr]``.

    ``attr`` is a ``Registry``, or a callable taking no arguments that returns one; a file without
    ``:attr`` uses its ``registry``.

    Raises:
        ConfigError: one line: the file cannot be found or imported (with the file, line and error), the
            factory raised, or the value is not a registry.
    """
    module_name, attr, given = _split(target)
    if not given and not module_name.endswith(".py"):
        raise ConfigError(f"--tools {target!r} must look like 'package.module:attr' or 'path/to/file.py[:attr]'")
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise ConfigError(f"--tools {target!r}: no file {module_name}; check the path")
        spec = importlib.util.spec_from_file_location(f"_tooldispatch_tools_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise ConfigError(f"--tools {target!r}: cannot load {module_name} as Python")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException as exc:
            sys.modules.pop(spec.name, None)
            raise ConfigError(f"--tools {target!r}: {_where(exc)}") from None
    else:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                raise ConfigError(f"--tools {target!r}: no module named {exc.name!r}; check the name") from None
            raise ConfigError(f"--tools {target!r}: {_where(exc)}") from None
        except BaseException as exc:
            raise ConfigError(f"--tools {target!r}: {_where(exc)}") from None
    if not hasattr(module, attr):
        raise ConfigError(f"--tools {target!r}: {module_name} has no attribute {attr!r}")
    value = getattr(module, attr)
    if callable(value) and not isinstance(value, Registry):
        try:
            value = value()
        except BaseException as exc:
            raise ConfigError(f"--tools {target!r}: {attr}() raised: {_where(exc)}") from None
    if not isinstance(value, Registry):
        raise ConfigError(f"--tools {target!r} is not a Registry nor a function returning one")
    return value


def _where(exc: BaseException) -> str:
    """``file:line: Type: message`` of where an exception arose in user code (the innermost frame outside us)."""
    if isinstance(exc, SyntaxError):
        place = f"{exc.filename}:{exc.lineno}: " if exc.filename else ""
        return f"{place}SyntaxError: {exc.msg}"
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not _ours(f.filename)]
    place = f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""
    text = str(exc).strip().splitlines()
    return f"{place}{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _ours(filename: str) -> bool:
    return filename.startswith("<frozen") or Path(filename).resolve().is_relative_to(Path(__file__).resolve().parent)
