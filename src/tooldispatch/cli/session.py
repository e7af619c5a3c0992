"""What ``run`` and ``chat`` share: settings from options and config, the agent with its store, tools and
world, and keeping each run in the store's run log (``tooldispatch.runlog``)."""

from __future__ import annotations

import asyncio
import json
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tooldispatch.errors import ConfigError

if TYPE_CHECKING:
    from rich.console import Console

    from tooldispatch.agent import Agent
    from tooldispatch.agent.records import AgentRun
    from tooldispatch.runlog import RunRecord
    from tooldispatch.sources import ToolSources
    from tooldispatch.store import StateStore

DEFAULT_PROFILE = "cpu-llamacpp"


@dataclass(slots=True)
class Settings:
    """Everything a run is started with, after options > config > built-in defaults."""

    profile: str = DEFAULT_PROFILE
    model: str | None = None
    base_url: str | None = None
    parse: str | None = None
    tools: list[str] = field(default_factory=list)
    mcp: list[str] = field(default_factory=list)
    mcp_logs: str | None = None
    constrained: str = "off"
    tool_choice: str = "auto"
    n_ctx: int | None = None
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = 384
    max_turns: int = 6
    threads: int | None = None
    answer_tool: bool = False
    repeat_guard: bool = True
    stuck_repeats: int = 3
    stuck_idle_turns: int = 4
    prefix_cache_mb: int | None = None
    store: str = ""

    def recorded(self) -> dict[str, Any]:
        """The settings kept with each run (``tooldispatch logs``)."""
        return {k: v for k, v in asdict(self).items() if k in RECORDED}


RECORDED = (
    "constrained",
    "tool_choice",
    "n_ctx",
    "temperature",
    "seed",
    "max_tokens",
    "max_turns",
    "threads",
    "answer_tool",
    "repeat_guard",
    "stuck_repeats",
    "stuck_idle_turns",
)
"""The settings kept with each run; with the profile, model, server and parse mode, what options and config set."""


def resolve(**given: Any) -> Settings:
    """Settings from the options given (``None``: not given), then ``config.toml``, then the defaults.

    Raises:
        ConfigError: the config file is broken, or ``--parse``/``--tool-choice`` has an unknown value.
    """
    from tooldispatch.home import default_store, load_config, resolve_model

    config = load_config()
    out = Settings()
    for name in ("profile", "model", "base_url", "parse", "prefix_cache_mb", *RECORDED):
        value = given.get(name)
        if value is None:
            value = config.get(name)
        if value is not None:
            setattr(out, name, value)
    out.model = resolve_model(out.model, config)
    out.tools = list(given.get("tools") or ([] if given.get("mcp") else ["demo"]))
    out.mcp = [str(p) for p in given.get("mcp") or []]
    logs = given.get("mcp_logs")
    out.mcp_logs = str(logs) if logs is not None else None
    out.store = given.get("store") or default_store()
    if out.parse not in (None, "server", "client"):
        raise ConfigError(f"unknown --parse {out.parse!r}; use server or client")
    if out.n_ctx == 0:
        out.n_ctx = None
    if out.threads == 0:
        out.threads = None
    if out.stuck_repeats == 1:
        raise ConfigError("--stuck-repeats 1 would end every run after one turn; use 2 or more, or 0 for never")
    return out


def prefix_cache_setting(given: int | None) -> int | None:
    """The prefix-cache bound in MB: the option, else ``config.toml``'s ``prefix_cache_mb``, else ``None``
    (the backend's default)."""
    if given is not None:
        return given
    from tooldispatch.home import load_config

    value = load_config().get("prefix_cache_mb")
    return int(value) if value is not None else None


def build_backend(settings: Settings) -> Any:
    """The backend of the settings' profile, with the model and llama.cpp settings applied."""
    from tooldispatch.profiles import backend_from_profile, load_profile
    from tooldispatch.profiles.kinds import kind

    prof = load_profile(settings.profile)
    overrides: dict[str, Any] = {}
    if settings.model:
        overrides["model"] = settings.model
    if kind(prof.backend).in_process:
        if settings.n_ctx is not None:
            overrides["n_ctx"] = settings.n_ctx
        if settings.threads is not None:
            overrides["n_threads"] = settings.threads
        if settings.prefix_cache_mb is not None:
            overrides["prefix_cache_mb"] = settings.prefix_cache_mb
        overrides["seed"] = settings.seed
    else:
        if settings.base_url:
            overrides["base_url"] = settings.base_url
        if settings.parse:
            overrides["parse"] = settings.parse
    return backend_from_profile(prof, **overrides)


def model_label(settings: Settings, backend: Any) -> str:
    """The model as ``logs`` shows it: the option or config, else what the profile loaded."""
    if settings.model:
        return settings.model
    from tooldispatch.profiles import load_profile

    prof = load_profile(settings.profile)
    return str(prof.model or getattr(backend, "model", "") or "?")


def open_store_for_runs(target: str) -> StateStore:
    """The store runs are kept in (created, with its folder, when it is the home's file)."""
    from tooldispatch.store import open_store

    if "://" not in target and target != ":memory:":
        Path(target).expanduser().parent.mkdir(parents=True, exist_ok=True)
    return open_store(target)


class Session:
    """One conversation: the backend, the store, the tools (the demo world in its own file) and the agent.

    ``run`` keeps every run in the store's run log; ``history`` continues an earlier conversation. All runs
    of a session share one event loop: an HTTP backend's client belongs to the loop it first ran on.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        console: Console,
        backend: Any,
        command: str,
        session_id: str | None = None,
        world: str | None = None,
        summary: bool = True,
    ) -> None:
        from tooldispatch.agent.display import LiveView
        from tooldispatch.dispatch import Dispatcher
        from tooldispatch.home import world_path
        from tooldispatch.sources import load_sources

        self.settings = settings
        self.command = command
        self.backend = backend
        self.session_id = session_id or f"s-{uuid.uuid4().hex[:12]}"
        self.world = world or (str(world_path(self.session_id)) if "demo" in settings.tools else "")
        if self.world:
            Path(self.world).parent.mkdir(parents=True, exist_ok=True)
        self.store: StateStore = open_store_for_runs(settings.store)
        try:
            self.sources: ToolSources = load_sources(
                settings.tools,
                settings.mcp,
                store=self.store,
                mcp_log_dir=settings.mcp_logs,
                demo_world=self.world or ":memory:",
            )
        except BaseException:
            self.store.close()
            raise
        for note in self.sources.notes:
            console.print(f"[yellow]note:[/yellow] {note}", highlight=False)
        prefix_cache = getattr(backend, "prefix_cache", None)  # the in-process llama.cpp backend has one
        if prefix_cache is not None:
            console.print(f"[dim]{prefix_cache.describe()}[/dim]", highlight=False)
        self.dispatcher = Dispatcher(self.sources.registry, store=self.store, tool_loop=self.sources.tool_loop)
        self.view = LiveView(console, summary=summary)
        self.agent: Agent = self._agent()
        self._loop = asyncio.new_event_loop()

    def _agent(self) -> Agent:
        from tooldispatch.agent import Agent, Budget

        s = self.settings
        system: str | None = None
        if "demo" in s.tools:
            from tooldispatch.tools.demo import SYSTEM_PROMPT

            system = SYSTEM_PROMPT
        kwargs: dict[str, Any] = {"system_prompt": system} if system else {}
        return Agent(
            backend=self.backend,
            dispatcher=self.dispatcher,
            budget=Budget(
                max_turns=s.max_turns,
                stuck_repeats=s.stuck_repeats or None,
                stuck_idle_turns=s.stuck_idle_turns or None,
            ),
            max_tokens=s.max_tokens,
            constrained=s.constrained != "off",
            tool_choice="required" if s.constrained == "required" else s.tool_choice,
            observer=self.view,
            session_id=self.session_id,
            temperature=s.temperature,
            seed=s.seed,
            answer_tool=s.answer_tool,
            repeat_guard=s.repeat_guard,
            **kwargs,
        )

    def run(
        self, task: str, *, history: list[dict[str, Any]] | None = None, parent_id: str | None = None
    ) -> tuple[AgentRun, RunRecord]:
        """Run one task (continuing ``history``) and keep it in the run log."""
        import time

        from tooldispatch.cli.exits import exit_code
        from tooldispatch.runlog import record_of, save

        started = time.time()
        run = self._loop.run_until_complete(self.agent.arun(task, history=history or ()))
        self.dispatcher.flush()
        record = record_of(
            run,
            session_id=self.session_id,
            command=self.command,
            task=task,
            model=model_label(self.settings, self.backend),
            profile=self.settings.profile,
            exit_code=exit_code(run),
            sources={"tools": self.settings.tools, "mcp": self.settings.mcp},
            world=self.world,
            settings=self.settings.recorded(),
            parent_id=parent_id,
            started_at=started,
        )
        save(self.store, record)
        return run, record

    def close(self) -> None:
        """Stop MCP servers, write pending traces and close the store."""
        try:
            self.sources.close()
        finally:
            self.dispatcher.close()
            self._loop.close()


def transcript(run: AgentRun, record: RunRecord) -> dict[str, Any]:
    """The JSON of ``--json`` and ``--transcript``: the run's record with model, profile, time and session."""
    return {
        "run_id": record.id,
        "session_id": record.session_id,
        "parent_id": record.parent_id,
        "started_at": record.started_at,
        "model": record.model,
        "profile": record.profile,
        "settings": record.settings,
        "sources": record.sources,
        "world": record.world,
        "exit_code": record.exit_code,
        **run.to_dict(),
    }


def dumps(data: Any) -> str:
    """JSON as the command line writes it."""
    return json.dumps(data, indent=2, ensure_ascii=False, default=str)
