"""Errors in OpenAI's shape with the right status, the proxy's key, bounds, and keys kept out of logs and the store."""

from __future__ import annotations

import json
import logging
import socket
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from tooldispatch.backends.scripted import ScriptedTurn
from tooldispatch.proxy import Limits, build_upstream
from tooldispatch.proxy.scripted import Canned, ScriptedServer

from .conftest import ASK, WEATHER, running_proxy, scripted_proxy

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

PROXY_KEY = "tdp-client-key-7f3a9c1e55d2"
UPSTREAM_KEY = "sk-or-v1-upstream-secret-0a1b2c3d4e5f"


def post(url: str, body: dict[str, Any], **headers: str) -> httpx2.Response:
    """POST a chat completions body to the proxy."""
    return httpx2.post(f"{url}/chat/completions", json=body, headers=headers, timeout=20)


def error_of(response: httpx2.Response) -> dict[str, Any]:
    """The ``error`` object of an OpenAI-shaped error answer (checking the shape)."""
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    error: dict[str, Any] = body["error"]
    return error


def free_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.parametrize("tools", [True, False])
def test_unreachable_upstream_is_502(tmp_path: Path, tools: bool) -> None:
    """A dead upstream is a 502 in OpenAI's shape naming the upstream, parsed and forwarded requests alike."""
    url = f"http://127.0.0.1:{free_port()}/v1"
    upstream = build_upstream(base_url=url, dialect="vllm", served_model="m")
    with running_proxy(upstream, tmp_path / "s.db", scripted=ScriptedServer(lambda b: ScriptedTurn())) as running:
        body: dict[str, Any] = {"model": "m", "messages": ASK, **({"tools": [WEATHER]} if tools else {})}
        response = post(running.url, body)
        rows = running.counted(1)
    assert response.status_code == 502
    error = error_of(response)
    assert error["type"] == "upstream_error" and error["code"] == "upstream_unavailable"
    assert url.removesuffix("/v1") in error["message"]
    assert [r[:2] for r in rows] == [(502, "upstream_unavailable")]


@pytest.mark.parametrize("tools", [True, False])
def test_upstream_rate_limit_is_429_with_retry_after(tmp_path: Path, tools: bool) -> None:
    """An upstream 429 reaches the client as a 429 with its Retry-After."""
    limited = json.dumps({"error": {"message": "slow down", "code": 429}}).encode()
    with scripted_proxy(tmp_path) as running:
        running.upstream.canned.append(Canned(429, limited, headers={"Retry-After": "3"}))
        body: dict[str, Any] = {"model": "m", "messages": ASK, **({"tools": [WEATHER]} if tools else {})}
        response = post(running.url, body)
    assert response.status_code == 429
    assert response.headers["retry-after"] == "3"
    assert "slow down" in response.json()["error"]["message"]


@pytest.mark.parametrize(("status", "expected"), [(400, 400), (500, 502), (503, 502), (401, 502)])
def test_upstream_error_statuses_on_parsed_requests(tmp_path: Path, status: int, expected: int) -> None:
    """Upstream errors on a request with tools: the client's own faults keep their status, the rest are 502."""
    failed = json.dumps({"error": {"message": f"upstream says {status}"}}).encode()
    with scripted_proxy(tmp_path) as running:
        running.upstream.canned.append(Canned(status, failed))
        response = post(running.url, {"model": "m", "messages": ASK, "tools": [WEATHER]})
    assert response.status_code == expected
    assert f"HTTP {status}" in error_of(response)["message"]


def test_upstream_timeout_is_504(tmp_path: Path) -> None:
    """An upstream that does not answer within the proxy's timeout is a 504."""
    slow = ScriptedTurn(content="late", reasoning_s=3.0)
    with scripted_proxy(tmp_path, script=lambda body: slow, timeout_s=0.5) as running:
        response = post(running.url, {"model": "m", "messages": ASK, "tools": [WEATHER]})
    assert response.status_code == 504
    assert error_of(response)["type"] == "timeout"


def test_invalid_tools_through_the_sdk_are_a_400_naming_the_tool(proxied: Any) -> None:
    """The SDK receives a BadRequestError whose message names the tool and the schema fault."""
    bad = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "required": "city"}}}
    sdk = openai.OpenAI(base_url=proxied.url, api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        sdk.chat.completions.create(model="m", messages=ASK, tools=[WEATHER, bad])  # type: ignore[list-item]
    assert "tool 'f' (tools[1]): 'parameters' is not a valid JSON Schema at /required" in info.value.message
    assert proxied.upstream.requests == []


def test_body_size_and_tool_count_are_bounded(tmp_path: Path) -> None:
    """A body over the bound is a 413 and too many tools a 400; the upstream is not asked."""
    with scripted_proxy(tmp_path, limits=Limits(max_body_bytes=4096, max_tools=3)) as running:
        big = post(running.url, {"model": "m", "messages": [{"role": "user", "content": "x" * 5000}]})
        tools = [{"type": "function", "function": {"name": f"t{i}"}} for i in range(4)]
        many = post(running.url, {"model": "m", "messages": ASK, "tools": tools})
        assert running.upstream.requests == []
    assert big.status_code == 413 and error_of(big)["code"] == "request_too_large"
    assert many.status_code == 400 and "at most 3 (--max-tools)" in error_of(many)["message"]


def test_every_route_needs_the_key_when_one_is_set(tmp_path: Path) -> None:
    """With a key, requests without it or with a wrong one are 401 on every route; the right key works."""
    with scripted_proxy(tmp_path, api_key=PROXY_KEY) as running:
        root = running.url.removesuffix("/v1")
        missing = post(running.url, {"model": "m", "messages": ASK})
        wrong = post(running.url, {"model": "m", "messages": ASK}, Authorization="Bearer nope")
        models = httpx2.get(f"{running.url}/models", timeout=5)
        health = httpx2.get(f"{root}/health", timeout=5)
        sdk = openai.OpenAI(base_url=running.url, api_key=PROXY_KEY, max_retries=0)
        answer = sdk.chat.completions.create(model="m", messages=ASK, tools=[WEATHER])  # type: ignore[list-item]
        assert running.upstream.requests and len(running.upstream.requests) == 1
    for response in (missing, wrong, models, health):
        assert response.status_code == 401 and error_of(response)["type"] == "authentication_error"
    assert answer.choices[0].finish_reason == "tool_calls"


def test_keys_never_reach_the_logs_the_store_or_the_upstream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Neither the client's key nor the upstream's appears in any log record or the store file, --record on."""
    monkeypatch.setenv("TD_TEST_UPSTREAM_KEY", UPSTREAM_KEY)
    caplog.set_level(logging.DEBUG)
    failed = json.dumps({"error": {"message": f"bad key {UPSTREAM_KEY}"}}).encode()
    with scripted_proxy(
        tmp_path, upstream_key_env="TD_TEST_UPSTREAM_KEY", api_key=PROXY_KEY, record=True, dialect="openrouter"
    ) as running:
        sdk = openai.OpenAI(base_url=running.url, api_key=PROXY_KEY, max_retries=0)
        sdk.chat.completions.create(model="m", messages=ASK, tools=[WEATHER])  # type: ignore[list-item]
        list(sdk.chat.completions.create(model="m", messages=ASK, tools=[WEATHER], stream=True))  # type: ignore[list-item]
        sdk.chat.completions.create(model="m", messages=ASK)
        running.upstream.canned.append(Canned(401, failed))
        with pytest.raises(openai.APIStatusError):
            sdk.chat.completions.create(model="m", messages=ASK, tools=[WEATHER])  # type: ignore[list-item]
        post(running.url, {"model": "m", "messages": ASK}, Authorization=f"Bearer {PROXY_KEY}x")
        rows = running.counted(5)
        records = running.store.fetchall("SELECT request, output, answer FROM proxy_records")
        sent_headers = running.upstream.headers
    assert len(rows) == 5 and len(records) == 3
    for header in sent_headers:
        assert header["authorization"] == f"Bearer {UPSTREAM_KEY}"
        assert PROXY_KEY not in json.dumps(header)
    for path in tmp_path.glob("state.db*"):
        data = path.read_bytes()
        assert PROXY_KEY.encode() not in data and UPSTREAM_KEY.encode() not in data
    logged = "\n".join(f"{r.getMessage()} {r.args!r}" for r in caplog.records)
    assert PROXY_KEY not in logged and UPSTREAM_KEY not in logged


@pytest.mark.parametrize("stream", [False, True])
def test_a_defect_is_a_500_in_openai_shape(tmp_path: Path, stream: bool) -> None:
    """An unexpected exception in the serving path is answered as an OpenAI error (500), streamed or not."""
    from tooldispatch.backends.scripted import ScriptedBackend
    from tooldispatch.proxy import Upstream

    def broken(request: Any) -> ScriptedTurn:
        raise RuntimeError("boom")

    upstream = Upstream(backend=ScriptedBackend(broken), model="s", label="s", quant="q", mode="in-process")
    with running_proxy(upstream, tmp_path / "s.db", scripted=ScriptedServer(lambda b: ScriptedTurn())) as running:
        response = post(running.url, {"model": "s", "messages": ASK, "tools": [WEATHER], "stream": stream})
        rows = running.counted(1)
    assert response.status_code == 500
    error = error_of(response)
    assert error["code"] == "internal_error" and "RuntimeError" in error["message"]
    assert [r[:2] for r in rows] == [(500, "internal_error")]
