"""A streamed answer whose first event is slow (a long prefill on a CPU) starts with SSE comments, not silence.

Clients give up on a connection that sends nothing (Qwen Code after 120 s, then it sends the request again); the
proxy answers 200 once ``keepalive_s`` has passed without the model's first event, sends an SSE comment every
``keepalive_s`` until it comes, and then streams as usual. An error after that start is an error event.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import openai
import pytest

from tooldispatch.backends.base import ChatRequest, Event
from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.errors import BackendUnavailable
from tooldispatch.proxy import Upstream

from .conftest import ASK, WEATHER, running_proxy
from .test_llama import _UNUSED

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

ANSWER = "It is sunny in Paris."


@dataclass
class SlowStart(ScriptedBackend):
    """The scripted model, silent for ``delay_s`` before its first event (or failing then, with ``fail``)."""

    delay_s: float = 0.0
    fail: Exception | None = None

    async def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
        await asyncio.sleep(self.delay_s)
        if self.fail is not None:
            raise self.fail
        async for event in super().stream(request):
            yield event


def _upstream(backend: ScriptedBackend) -> Upstream:
    return Upstream(backend=backend, model="local", label="local", quant="q", mode="in-process")


def test_a_slow_first_event_is_preceded_by_comments_and_the_answer_is_whole(tmp_path: Path) -> None:
    """Comments every keepalive_s while the model is silent; then the usual chunks, a finish and [DONE]."""
    backend = SlowStart([ScriptedTurn(content=ANSWER, chunk=5)], delay_s=0.6)
    with running_proxy(_upstream(backend), tmp_path / "state.db", scripted=_UNUSED, keepalive_s=0.1) as running:
        body = {"model": "m", "messages": ASK, "tools": [WEATHER], "stream": True}
        response = httpx2.post(f"{running.url}/chat/completions", json=body, timeout=30)
        running.counted(1)
    assert response.status_code == 200
    parts = response.text.split("\n\n")
    comments = [p for p in parts if p.startswith(":")]
    assert 3 <= len(comments) <= 7 and set(comments) == {": waiting for the model"}
    assert parts.index(comments[-1]) < min(i for i, p in enumerate(parts) if p.startswith("data: "))
    events = [json.loads(p[6:]) for p in parts if p.startswith("data: {")]
    assert "".join(e["choices"][0]["delta"].get("content") or "" for e in events) == ANSWER
    assert [e["choices"][0]["finish_reason"] for e in events][-1] == "stop"
    assert response.text.endswith("data: [DONE]\n\n")


def test_the_openai_sdk_reads_an_answer_that_began_with_comments(tmp_path: Path) -> None:
    """The openai SDK skips the comments: the streamed answer it assembles is the model's."""
    backend = SlowStart([ScriptedTurn(content=ANSWER, chunk=5)], delay_s=0.5)
    with running_proxy(_upstream(backend), tmp_path / "state.db", scripted=_UNUSED, keepalive_s=0.1) as running:
        client = openai.OpenAI(base_url=running.url, api_key="unused", max_retries=0)
        chunks = list(client.chat.completions.create(model="m", messages=ASK, tools=[WEATHER], stream=True))  # type: ignore[arg-type, list-item]
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ANSWER


def test_a_failure_after_the_comments_is_an_error_event(tmp_path: Path) -> None:
    """The status is already 200 when the model fails: the client gets an error event and [DONE], not a cut."""
    dead = BackendUnavailable("the model crashed while reading the prompt")
    backend = SlowStart([ScriptedTurn(content=ANSWER)], delay_s=0.4, fail=dead)
    with running_proxy(_upstream(backend), tmp_path / "state.db", scripted=_UNUSED, keepalive_s=0.1) as running:
        body = {"model": "m", "messages": ASK, "tools": [WEATHER], "stream": True}
        response = httpx2.post(f"{running.url}/chat/completions", json=body, timeout=30)
        rows = running.counted(1)
    assert response.status_code == 200
    assert response.text.startswith(": waiting for the model\n\n")
    errors = [json.loads(p[6:]) for p in response.text.split("\n\n") if p.startswith('data: {"error"')]
    assert len(errors) == 1 and "the model crashed while reading the prompt" in errors[0]["error"]["message"]
    assert response.text.endswith("data: [DONE]\n\n")
    assert rows[0][0] >= 500


def test_a_quick_first_event_sends_no_comment(tmp_path: Path) -> None:
    """Under keepalive_s the answer starts with its first chunk, as before."""
    backend = SlowStart([ScriptedTurn(content=ANSWER, chunk=5)])
    with running_proxy(_upstream(backend), tmp_path / "state.db", scripted=_UNUSED, keepalive_s=5.0) as running:
        body = {"model": "m", "messages": ASK, "tools": [WEATHER], "stream": True}
        response = httpx2.post(f"{running.url}/chat/completions", json=body, timeout=30)
    assert response.status_code == 200 and response.text.startswith("data: {")


def test_a_client_that_leaves_during_the_wait_is_counted_and_the_model_stopped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Hanging up after the first comment cancels the wait for the model: 499 counted, no error logged."""
    backend = SlowStart([ScriptedTurn(content=ANSWER, chunk=5)], delay_s=3.0)
    with running_proxy(_upstream(backend), tmp_path / "state.db", scripted=_UNUSED, keepalive_s=0.1) as running:
        body = {"model": "m", "messages": ASK, "tools": [WEATHER], "stream": True}
        with httpx2.stream("POST", f"{running.url}/chat/completions", json=body, timeout=30) as response:
            first = next(response.iter_bytes())
        rows = running.counted(1)
    assert first.startswith(b": waiting for the model")
    assert rows[0][:2] == (499, "client_disconnected")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
