"""The context window as a budget: a full window ends the run with its own reason, never a backend error."""

from __future__ import annotations

from collections.abc import AsyncIterator

from tooldispatch.agent import Agent, Budget
from tooldispatch.backends.base import Capabilities, ChatRequest, Event
from tooldispatch.backends.llamacpp import DEFAULT_N_CTX_CAP, default_n_ctx
from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.dispatch import Registry
from tooldispatch.errors import ContextWindowExceeded
from tooldispatch.models.gguf import GGUFHeader


class _WindowBackend:
    """Answers with a read-only call until the conversation holds ``fits`` messages, then refuses the prompt."""

    def __init__(self, fits: int) -> None:
        self.fits = fits
        self.inner = ScriptedBackend(lambda _r: ScriptedTurn(content='<tool_call>{"name": "ping", "arguments": {}}'))

    @property
    def capabilities(self) -> Capabilities:
        return self.inner.capabilities

    async def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
        if len(request.messages) > self.fits:
            raise ContextWindowExceeded(
                "the prompt has 300 tokens and the turn needs room for 64 more, but the context window is 320 tokens",
                prompt_tokens=300,
                n_ctx=320,
                reserve=64,
            )
        async for event in self.inner.stream(request):
            yield event


def _registry() -> Registry:
    reg = Registry()
    reg.register(
        "ping",
        lambda: {"ok": True},
        description="Ping",
        schema={"type": "object", "properties": {}},
        read_only=True,
        concurrency_safe=True,
    )
    return reg


def test_full_window_ends_the_run_with_context_window() -> None:
    """When the next prompt no longer fits, the run ends as ``context_window`` with the reason, turns kept (the
    repeat guard and the stuck detector off, so the repeated ping reaches the full window)."""
    budget = Budget(max_turns=10, stuck_repeats=None, stuck_idle_turns=None)
    run = Agent(backend=_WindowBackend(fits=4), registry=_registry(), budget=budget, repeat_guard=False).run("go")
    assert run.end == "context_window"
    assert run.error == (
        "the prompt has 300 tokens and the turn needs room for 64 more, but the context window is 320 tokens"
    )
    assert len(run.turns) == 2
    assert [r.result.status for t in run.turns for r in t.tool_runs] == ["ok", "ok"]


def test_default_n_ctx_follows_the_model_capped() -> None:
    """The window is the GGUF's context length capped at 16,384; the manifest's when the file is silent."""
    qwen = GGUFHeader(version=3, metadata={"general.architecture": "qwen2", "qwen2.context_length": 32768})
    smol = GGUFHeader(version=3, metadata={"general.architecture": "llama", "llama.context_length": 8192})
    silent = GGUFHeader(version=3, metadata={"general.architecture": "gemma3"})
    assert DEFAULT_N_CTX_CAP == 16_384
    assert default_n_ctx(qwen) == 16_384
    assert default_n_ctx(smol) == 8192
    assert default_n_ctx(silent, 2048) == 2048
    assert default_n_ctx(silent) == 4096
    assert default_n_ctx(qwen, cap=32768) == 32768


def test_sampling_settings_reach_every_request() -> None:
    """``temperature`` and ``seed`` given to the agent are sent with each model turn."""
    backend = ScriptedBackend(
        [ScriptedTurn(content='<tool_call>{"name": "ping", "arguments": {}}'), ScriptedTurn("ok")]
    )
    Agent(backend=backend, registry=_registry(), temperature=0.7, seed=3).run("go")
    assert [(r.temperature, r.seed) for r in backend.requests] == [(0.7, 3), (0.7, 3)]
