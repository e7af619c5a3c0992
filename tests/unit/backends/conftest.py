"""Replay wire fixtures through a real HTTP server on 127.0.0.1, so the ``openai`` client runs unchanged."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tooldispatch.backends.base import Event

WIRE = Path(__file__).resolve().parents[2] / "fixtures" / "wire"


def load_fixture(name: str) -> dict[str, Any]:
    """Load ``tests/fixtures/wire/<name>.json``."""
    data: dict[str, Any] = json.loads((WIRE / f"{name}.json").read_text())
    return data


def untimed(events: list[Event]) -> list[Event]:
    """The events with their timestamps zeroed, for exact comparison."""
    return [replace(e, t=0.0) for e in events]


@dataclass
class WireServer:
    """A loopback HTTP server that answers each POST with the next queued fixture."""

    url: str
    queue: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)

    def serve(self, *names: str) -> None:
        """Queue fixtures by name; each request consumes one."""
        self.queue.extend(load_fixture(n) for n in names)

    def serve_cut(self, name: str, *, after_bytes: int) -> None:
        """Queue a fixture whose body stops after ``after_bytes`` bytes, then the connection closes."""
        self.queue.append({**load_fixture(name), "cut_after_bytes": after_bytes})


@pytest.fixture
def wire_server() -> Iterator[WireServer]:
    """A fixture-replaying server on a free loopback port, stopped after the test."""
    state: WireServer

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            state.requests.append(json.loads(self.rfile.read(length) or b"{}"))
            state.headers.append({k.lower(): v for k, v in self.headers.items()})
            fixture = state.queue.pop(0)
            body = fixture["body"].encode()
            cut = fixture.get("cut_after_bytes")
            self.send_response(fixture["status"])
            self.send_header("Content-Type", fixture["content_type"])
            for key, value in fixture.get("headers", {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body if cut is None else body[:cut])
            if cut is not None:
                self.wfile.flush()
                self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state = WireServer(url=f"http://127.0.0.1:{server.server_address[1]}/v1")
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
