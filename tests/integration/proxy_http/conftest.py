"""A scripted upstream and the proxy in front of it, both real uvicorn servers on 127.0.0.1."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tooldispatch.backends.scripted import ScriptedTurn
from tooldispatch.proxy import Limits, Proxy, Recorder, Upstream, build_app, build_upstream
from tooldispatch.proxy.scripted import ScriptedServer, serve_in_thread
from tooldispatch.store import Store

WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
        },
    },
}
ASK = [{"role": "user", "content": "Weather in Paris?"}]
HERMES_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "Celsius"}}\n</tool_call>'


def default_script(body: Mapping[str, Any]) -> ScriptedTurn:
    """A call in hermes tags (with an enum to repair) when tools are offered in any form, else a greeting."""
    if "get_weather" in json.dumps(body.get("messages")) or body.get("tools"):
        return ScriptedTurn(content=f"Let me check.\n{HERMES_CALL}", reasoning="The user wants weather.", chunk=7)
    return ScriptedTurn(content="Hello there, how can I help?", chunk=4)


@dataclass
class Running:
    """A proxy in front of a scripted upstream.

    Attributes:
        url: the proxy's API root (``.../v1``).
        upstream: the scripted upstream's state.
        store: the store requests are counted in.
        proxy: the proxy's routes.
    """

    url: str
    upstream: ScriptedServer
    store: Store
    proxy: Proxy

    def counted(self, n: int = 1, *, within_s: float = 5.0) -> list[tuple[Any, ...]]:
        """The ``proxy_requests`` rows (status, error, mode, calls), once ``n`` requests are counted.

        A request is counted when its answer has ended on the proxy's side, which may be just after the client
        saw its last byte.
        """
        assert self.proxy.recorder is not None
        deadline = time.monotonic() + within_s
        while True:
            self.proxy.recorder.flush()
            rows = self.store.fetchall("SELECT status, error, mode, calls FROM proxy_requests ORDER BY created_at")
            if len(rows) >= n or time.monotonic() > deadline:
                return rows
            time.sleep(0.02)


@contextmanager
def running_proxy(
    upstream: Upstream, store_path: Path, *, scripted: ScriptedServer, limits: Limits | None = None, **kwargs: Any
) -> Iterator[Running]:
    """Serve a proxy for ``upstream`` on a free loopback port, counting into ``store_path``."""
    store = Store(store_path)
    proxy = Proxy(upstream, limits or Limits(), recorder=Recorder(store), **kwargs)
    try:
        with serve_in_thread(build_app(proxy)) as served:
            yield Running(url=f"{served.url}/v1", upstream=scripted, store=store, proxy=proxy)
    finally:
        store.close()


@contextmanager
def scripted_proxy(
    tmp_path: Path,
    *,
    script: Any = default_script,
    dialect: str = "llama-server",
    parse: str | None = None,
    upstream_key_env: str | None = None,
    timeout_s: float | None = None,
    **kwargs: Any,
) -> Iterator[Running]:
    """A scripted upstream on loopback and a proxy in front of it."""
    scripted = ScriptedServer(script)
    with serve_in_thread(scripted.app()) as up:
        upstream = build_upstream(
            base_url=f"{up.url}/v1",
            dialect=dialect,
            parse=parse,  # type: ignore[arg-type]
            upstream_key_env=upstream_key_env,
            timeout_s=timeout_s,
        )
        with running_proxy(upstream, tmp_path / "state.db", scripted=scripted, **kwargs) as running:
            yield running


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[Running]:
    """The default scripted upstream (client parse mode) behind a proxy."""
    with scripted_proxy(tmp_path) as running:
        yield running
