"""The runner against a real OpenAI-compatible HTTP server on 127.0.0.1 speaking the OpenRouter dialect.

The server is a small local stand-in written for this test: its SSE chunks follow OpenRouter's documented
stream (``provider`` on every chunk, ``usage.cost`` in the last chunk); the 429 answer carries
``Retry-After`` as OpenRouter documents. Nothing leaves the machine.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tooldispatch.backends.openai_compat import OpenAICompatBackend
from tooldispatch.bench.bfcl_data import BfclCase
from tooldispatch.bench.corpus import Cell
from tooldispatch.bench.report import summarize
from tooldispatch.bench.results_db import ResultsDB
from tooldispatch.bench.runner import ModelFacts, RunOptions, Target, run_bfcl
from tooldispatch.bench.targets import openrouter_provider

pytestmark = pytest.mark.integration

FN = {
    "name": "get.weather",
    "description": "Weather for a city.",
    "parameters": {"type": "dict", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
CASES = [
    BfclCase(
        id=f"simple_python_{i}",
        category="simple_python",
        messages=({"role": "user", "content": "Weather in Paris?"},),
        functions=(FN,),
        ground_truth=({"get.weather": {"city": ["Paris"]}},),
    )
    for i in range(3)
]
SECRET = "sk-or-test-not-a-real-key-123456"


class _State:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.rate_limit_first = 1


def _handler(state: _State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state.bodies.append(body)
            state.headers.append({k.lower(): v for k, v in self.headers.items()})
            if state.rate_limit_first > 0:
                state.rate_limit_first -= 1
                payload = json.dumps({"error": {"code": 429, "message": "Rate limit exceeded"}}).encode()
                self.send_response(429)
                self.send_header("Content-Type", "application/json")
                self.send_header("Retry-After", "0")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            call = '<tool_call>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_call>'
            chunks = [
                {"choices": [{"index": 0, "delta": {"role": "assistant", "content": call[:20]}}]},
                {"choices": [{"index": 0, "delta": {"content": call[20:]}}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                {"choices": [], "usage": {"prompt_tokens": 50, "completion_tokens": 20, "cost": 0.00012}},
            ]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            self.wfile.write(b": OPENROUTER PROCESSING\n\n")
            for chunk in chunks:
                full = {"id": "gen-1", "object": "chat.completion.chunk", "created": 1, "model": body["model"]}
                full |= {"provider": "DeepInfra", **chunk}
                self.wfile.write(f"data: {json.dumps(full)}\n\n".encode())
            self.wfile.write(b"data: [DONE]\n\n")

    return Handler


@pytest.fixture
def server() -> Iterator[tuple[str, _State]]:
    state = _State()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", state
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_pinned_route_provider_and_cost_are_recorded(
    server: tuple[str, _State], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 429 pauses and retries; each request pins the route; provider and cost land in the corpus, the key never."""
    url, state = server
    monkeypatch.setenv("TD_TEST_OPENROUTER_KEY", SECRET)
    provider = openrouter_provider("fp8", ["deepinfra"])

    def make() -> OpenAICompatBackend:
        return OpenAICompatBackend(
            base_url=url,
            model="qwen/qwen3-32b",
            dialect="openrouter",
            api_key_env="TD_TEST_OPENROUTER_KEY",
            provider=provider,
        )

    target = Target(
        cell=Cell(backend="openrouter", model="qwen/qwen3-32b", quant="fp8"),
        make_backend=make,
        facts=ModelFacts(family="qwen3", tool_format="hermes"),
    )
    db = ResultsDB(tmp_path)
    result = asyncio.run(run_bfcl([target], CASES, db, RunOptions(concurrency=2, max_tokens=64)))
    assert (result.stored, result.pauses, result.failed) == (3, 1, [])
    assert len(state.bodies) == 4
    assert {json.dumps(b["provider"], sort_keys=True) for b in state.bodies} == {
        json.dumps(
            {"allow_fallbacks": False, "only": ["deepinfra"], "quantizations": ["fp8"], "require_parameters": True},
            sort_keys=True,
        )
    }
    assert state.headers[0]["authorization"] == f"Bearer {SECRET}"
    records = list(db.records())
    assert {(r.provider, r.cost, r.prompt_tokens, r.completion_tokens) for r in records} == {
        ("DeepInfra", 0.00012, 50, 20)
    }
    stored = "".join(json.dumps(r.to_dict()) for r in records)
    assert SECRET not in stored
    [cell] = summarize(records).cells
    assert (cell.providers, round(cell.cost_usd or 0, 8)) == ({"DeepInfra": 3}, 0.00036)
    assert (cell.accuracy["strict"].k, cell.accuracy["repair"].k) == (0, 3)
