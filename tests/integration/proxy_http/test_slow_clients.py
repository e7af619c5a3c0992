"""Slow clients: request headers and bodies trickled a byte at a time are cut at --client-timeout, with a log line."""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2
import pytest

from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.proxy import Limits, Proxy, Upstream, build_app
from tooldispatch.proxy.scripted import serve_in_thread
from tooldispatch.proxy.server import with_head_timeout

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

LIMIT_S = 0.6
BODY = json.dumps({"model": "s", "messages": [{"role": "user", "content": "hi"}]}).encode()


@contextmanager
def served() -> Iterator[tuple[str, int]]:
    """A proxy (scripted in-process upstream) with a 0.6 s client timeout; yields its host and port."""
    backend = ScriptedBackend(lambda request: ScriptedTurn(content="Hello."))
    upstream = Upstream(backend=backend, model="s", label="s", quant="q", mode="in-process")
    proxy = Proxy(upstream, Limits(), client_timeout_s=LIMIT_S)
    with serve_in_thread(build_app(proxy), http=with_head_timeout(LIMIT_S)) as running:
        host, port = running.url.removeprefix("http://").split(":")
        yield host, int(port)


def trickle(address: tuple[str, int], data: bytes, *, gap_s: float = 0.15) -> tuple[bytes, float]:
    """Send ``data`` a byte every ``gap_s`` until the server answers or closes; what it sent, and when."""
    started = time.monotonic()
    with socket.create_connection(address, timeout=10) as sock:
        sock.settimeout(gap_s)
        answer = b""
        for byte in data:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            try:
                piece = sock.recv(65536)
            except TimeoutError:
                continue
            answer += piece
            if not piece or answer:
                break
        sock.settimeout(5)
        while piece := sock.recv(65536):
            answer += piece
    return answer, time.monotonic() - started


def test_headers_trickled_are_cut_with_a_408_and_a_log_line(caplog: pytest.LogCaptureFixture) -> None:
    """A client sending its request head a byte every 0.15 s gets a 408 and a closed connection after 0.6 s."""
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" * 4
    with caplog.at_level(logging.WARNING, logger="tooldispatch.proxy"), served() as address:
        answer, took = trickle(address, head)
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert answer.endswith(b"\r\n\r\nthe request headers did not arrive in time; send them whole, promptly\n")
    assert LIMIT_S <= took < 5
    [line] = [r.getMessage() for r in caplog.records if "request headers did not arrive" in r.getMessage()]
    assert line.startswith("dropped the connection of 127.0.0.1:")
    assert line.endswith(": its request headers did not arrive within 0.6 s (--client-timeout)")


def test_a_client_still_sending_when_cut_reads_the_408_not_a_reset() -> None:
    """A client that keeps sending its head past the bound, reading nothing, still reads the whole 408 afterwards.

    The server stops writing and drops what arrives after the answer instead of closing with unread bytes, which
    the kernel would answer with a reset that can discard the 408 before the client reads it.
    """
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + b"X-Padding: abcdefghijklmnopqrstuvwxyz\r\n" * 100
    with served() as address, socket.create_connection(address, timeout=10) as sock:
        sent_until = time.monotonic() + LIMIT_S * 1.5
        for byte in head:
            if time.monotonic() > sent_until:
                break
            sock.sendall(bytes([byte]))
            time.sleep(0.001)
        else:
            pytest.fail("the head ran out before the bound; make it longer")
        answer = b""
        while piece := sock.recv(65536):
            answer += piece
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout\r\n")
    assert answer.endswith(b"\r\n\r\nthe request headers did not arrive in time; send them whole, promptly\n")


def test_body_trickled_is_cut_at_the_bound_for_the_whole_body() -> None:
    """A body arriving a byte every 0.15 s (each gap well under the bound) is a 408 after 0.6 s in all."""
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    head += b"Content-Length: %d\r\n\r\n" % len(BODY)
    answer = b""
    with served() as address:
        started = time.monotonic()
        with socket.create_connection(address, timeout=10) as sock:
            sock.sendall(head)
            sock.settimeout(0.15)
            for byte in BODY:
                try:
                    sock.sendall(bytes([byte]))
                    answer += sock.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    break
                if answer:
                    break
            sock.settimeout(5)
            while b"\r\n\r\n" not in answer or not answer.endswith(b"}"):
                piece = sock.recv(65536)
                if not piece:
                    break
                answer += piece
        took = time.monotonic() - started
    status, _, rest = answer.partition(b"\r\n")
    assert status == b"HTTP/1.1 408 Request Timeout"
    error = json.loads(rest.partition(b"\r\n\r\n")[2])["error"]
    assert (error["code"], error["message"]) == (
        "request_timeout",
        "the request body did not arrive within 0.6 s; send it whole, promptly",
    )
    assert LIMIT_S <= took < 5


def test_prompt_clients_are_served_on_kept_alive_connections() -> None:
    """Requests sent whole, two on one kept-alive connection with a pause between, are answered as usual."""
    with served() as (host, port), httpx2.Client(base_url=f"http://{host}:{port}/v1", timeout=10) as client:
        first = client.post("/chat/completions", content=BODY, headers={"content-type": "application/json"})
        time.sleep(LIMIT_S * 1.5)  # idle longer than the head bound: the next head's timer starts with its bytes
        second = client.post("/chat/completions", content=BODY, headers={"content-type": "application/json"})
    assert [first.status_code, second.status_code] == [200, 200]
    assert second.json()["choices"][0]["message"]["content"] == "Hello."
