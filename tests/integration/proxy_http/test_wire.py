"""The proxy's SDK-free path to an HTTP upstream gives the events and errors the backend's own path gives."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx2
import pytest

from tooldispatch.backends.base import ChatRequest, Event
from tooldispatch.backends.openai_compat import OpenAICompatBackend
from tooldispatch.errors import TooldispatchError
from tooldispatch.proxy.http1 import Http1Pool
from tooldispatch.proxy.scripted import Canned, ScriptedServer, serve_in_thread
from tooldispatch.proxy.translate import Limits, read_request
from tooldispatch.proxy.wire import wire_events

from .conftest import ASK, WEATHER

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]
WIRE = Path(__file__).resolve().parents[2] / "fixtures" / "wire"
FIXTURES = sorted(p.relative_to(WIRE).with_suffix("").as_posix() for p in WIRE.glob("*/*.json"))
DIALECTS = {
    "vllm": "vllm",
    "openrouter": "openrouter",
    "llama_server": "llama-server",
    "llama_cpp_python": "llama-server",
}


async def _run(events: Any) -> tuple[list[Event], str | None]:
    out: list[Event] = []
    try:
        async for event in events:
            out.append(replace(event, t=0.0))
    except TooldispatchError as exc:
        return out, f"{type(exc).__name__}: {exc}"
    return out, None


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize(("parse", "transport"), [("server", "http1"), ("client", "http1"), ("server", "httpx2")])
def test_wire_path_equals_the_backend_path(
    name: str, parse: str, transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each recorded exchange read through wire_events (on either transport) and through the backend gives the
    same events or error, from the same request body."""
    monkeypatch.setenv("TD_WIRE_KEY", "sk-test-wire-0123")
    fixture: dict[str, Any] = json.loads((WIRE / f"{name}.json").read_text())
    stream = fixture["content_type"].startswith("text/event-stream")
    canned = Canned(fixture["status"], fixture["body"].encode(), fixture["content_type"], fixture.get("headers", {}))
    server = ScriptedServer(lambda body: None)  # type: ignore[arg-type, return-value]  # only canned answers
    body = {"messages": ASK, "tools": [WEATHER], "temperature": 0.2, "top_p": 0.9}
    request: ChatRequest = read_request(body, limits=Limits(), constrained=False).chat
    with serve_in_thread(server.app()) as up:
        backend = OpenAICompatBackend(
            base_url=f"{up.url}/v1",
            model="m",
            dialect=DIALECTS[name.split("/")[0]],  # type: ignore[arg-type]
            parse=parse,  # type: ignore[arg-type]
            api_key_env="TD_WIRE_KEY",
            timeout_s=10,
        )

        async def both() -> tuple[tuple[list[Event], str | None], tuple[list[Event], str | None]]:
            server.canned.append(canned)
            sdk = await _run(backend.stream(request) if stream else backend.complete(request))
            server.canned.append(canned)
            headers = {"Authorization": "Bearer sk-test-wire-0123"}
            if transport == "http1":
                pool = Http1Pool(backend.base_url, timeout_s=10, headers=headers)
                ours = await _run(wire_events(backend, pool, request, stream=stream))
                await pool.aclose()
            else:
                async with httpx2.AsyncClient(headers=headers) as http:
                    ours = await _run(wire_events(backend, http, request, stream=stream))
            await backend.aclose()
            return sdk, ours

        sdk, ours = asyncio.run(both())
    assert ours == sdk
    sent_sdk, sent_ours = server.requests
    assert sent_ours == sent_sdk
