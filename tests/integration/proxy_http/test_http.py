"""The HTTP/1.1 client of an HTTP upstream (the backend's and the proxy's): framing read from whatever arrives,
kept-alive connections, failures named.

The upstream here is a raw asyncio server on 127.0.0.1 that writes each answer in the pieces a test gives
(with a pause between pieces, so they arrive apart), and counts the connections it accepted.
"""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tooldispatch.backends.base import ChatRequest, ContentDelta, Finish
from tooldispatch.backends.http import HttpPool, UpstreamError, UpstreamTimeout
from tooldispatch.backends.openai_compat import OpenAICompatBackend
from tooldispatch.errors import ProviderError

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

CLOSE = b"<close>"  # a piece that makes the server close the connection
PAUSE = b"<pause>"  # a piece that makes the server wait 0.3 s


@dataclass
class RawServer:
    """Answers each request with the next list of pieces."""

    answers: list[list[bytes]]
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                )
                self.requests.append(head + await reader.readexactly(length))
                for piece in self.answers.pop(0):
                    if piece == CLOSE:
                        writer.close()
                        return
                    if piece == PAUSE:
                        await asyncio.sleep(0.3)
                        continue
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0.002)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


@asynccontextmanager
async def raw_server(answers: list[list[bytes]]) -> AsyncIterator[tuple[RawServer, str]]:
    state = RawServer(answers)
    server = await asyncio.start_server(state.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield state, f"http://127.0.0.1:{port}/v1"
    finally:
        server.close()


def head(extra: str) -> bytes:
    return f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{extra}\r\n".encode()


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


CHUNKED = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\n\r\n"


async def test_chunked_body_split_at_every_byte_is_read_exactly() -> None:
    """A chunked answer arriving one byte at a time (size lines, data and CRLFs all split) reads as its data."""
    async with raw_server([[head("transfer-encoding: chunked\r\n"), *bytewise(CHUNKED)]]) as (_, url):
        pool = HttpPool(url, timeout_s=5)
        reply = await pool.post("/chat/completions", b"{}")
        assert (reply.status, await reply.read()) == (200, b"hello, world")
        assert len(pool.idle) == 1
        await pool.aclose()


async def test_chunked_trailers_are_read_and_the_connection_reused() -> None:
    """Trailers after the last chunk are consumed, and the next request goes over the same connection."""
    body = b"3\r\nabc\r\n0\r\nx-trailer: 1\r\n\r\n"
    answers = [[head("transfer-encoding: chunked\r\n") + body], [head("content-length: 2\r\n") + b"ok"]]
    async with raw_server(answers) as (server, url):
        pool = HttpPool(url, timeout_s=5)
        assert await (await pool.post("/chat/completions", b"{}")).read() == b"abc"
        assert await (await pool.post("/chat/completions", b"{}")).read() == b"ok"
        assert server.connections == 1
        await pool.aclose()


async def test_content_length_body_in_pieces_and_kept_alive() -> None:
    """A Content-Length answer in several pieces reads whole; two requests share one connection."""
    answers = [[head("content-length: 11\r\n"), b"hello", b" ", b"world"], [head("content-length: 2\r\n"), b"ok"]]
    async with raw_server(answers) as (server, url):
        pool = HttpPool(url, timeout_s=5)
        assert await (await pool.post("/chat/completions", b"{}")).read() == b"hello world"
        assert await (await pool.post("/chat/completions", b"{}")).read() == b"ok"
        assert (server.connections, len(server.requests)) == (1, 2)
        await pool.aclose()


async def test_body_framed_by_the_connection_end_is_read_and_not_reused() -> None:
    """Without Content-Length or chunking, the body ends with the connection, which is then not reused."""
    async with raw_server([[head(""), b"all of it", CLOSE]]) as (_, url):
        pool = HttpPool(url, timeout_s=5)
        assert await (await pool.post("/chat/completions", b"{}")).read() == b"all of it"
        assert pool.idle == []


async def test_no_content_answer_has_no_body_and_keeps_the_connection() -> None:
    """A 204 answer is read as an empty body without waiting for the connection to end, and the connection is
    reused."""
    answers = [[b"HTTP/1.1 204 No Content\r\n\r\n"], [head("content-length: 2\r\n") + b"ok"]]
    async with raw_server(answers) as (server, url):
        pool = HttpPool(url, timeout_s=5)
        reply = await pool.post("/chat/completions", b"{}")
        assert (reply.status, await reply.read()) == (204, b"")
        assert await (await pool.post("/chat/completions", b"{}")).read() == b"ok"
        assert server.connections == 1
        await pool.aclose()


async def test_request_is_sent_whole_with_its_headers() -> None:
    """The request line, the pool's headers and the body arrive as one well-formed POST."""
    async with raw_server([[head("content-length: 0\r\n")]]) as (server, url):
        pool = HttpPool(url, timeout_s=5, headers={"Authorization": "Bearer k"})
        await (await pool.post("/chat/completions", b'{"a": 1}')).read()
        sent = server.requests[0]
        assert sent.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
        assert b"\r\nAuthorization: Bearer k\r\n" in sent
        assert b"\r\nContent-Length: 8\r\n" in sent
        assert sent.endswith(b'\r\n\r\n{"a": 1}')
        await pool.aclose()


async def test_malformed_chunk_size_is_an_upstream_error() -> None:
    """A chunk size that is not hexadecimal fails with UpstreamError naming the fault (llhttp's words)."""
    async with raw_server([[head("transfer-encoding: chunked\r\n"), b"zz\r\nhello\r\n"]]) as (_, url):
        pool = HttpPool(url, timeout_s=5)
        reply = await pool.post("/chat/completions", b"{}")
        with pytest.raises(UpstreamError, match=r"not valid HTTP/1\.1 \(Invalid character in chunk size\)"):
            await reply.read()
        assert pool.idle == []


async def test_connection_closed_mid_body_is_an_upstream_error() -> None:
    """An answer cut off before its Content-Length is complete fails with UpstreamError."""
    async with raw_server([[head("content-length: 100\r\n"), b"partial", CLOSE]]) as (_, url):
        pool = HttpPool(url, timeout_s=5)
        reply = await pool.post("/chat/completions", b"{}")
        with pytest.raises(UpstreamError, match="closed the connection before the whole answer"):
            await reply.read()
        assert pool.idle == []


async def test_silent_upstream_times_out() -> None:
    """An upstream that sends its head and then nothing fails with UpstreamTimeout after the pool's timeout."""
    async with raw_server([[head("content-length: 10\r\n"), PAUSE, PAUSE, b"0123456789"]]) as (_, url):
        pool = HttpPool(url, timeout_s=0.2)
        reply = await pool.post("/chat/completions", b"{}")
        with pytest.raises(UpstreamTimeout, match=r"no answer within 0\.2 s"):
            await reply.read()
        assert pool.idle == []


async def test_kept_alive_connection_closed_by_the_upstream_is_replaced() -> None:
    """When the upstream closed an idle kept-alive connection, the next request goes out on a new one."""
    answers = [[head("content-length: 2\r\n") + b"ok", CLOSE], [head("content-length: 3\r\n") + b"yes"]]
    async with raw_server(answers) as (server, url):
        pool = HttpPool(url, timeout_s=5)
        assert await (await pool.post("/chat/completions", b"{}")).read() == b"ok"
        await asyncio.sleep(0.05)  # the server's close arrives
        assert await (await pool.post("/chat/completions", b"{}")).read() == b"yes"
        assert server.connections == 2
        await pool.aclose()


def _sse(*events: str) -> list[bytes]:
    """Chunked SSE pieces, one event per chunk, the terminating chunk in a piece of its own."""
    pieces = [head("content-type: text/event-stream\r\ntransfer-encoding: chunked\r\n")]
    for event in events:
        data = f"data: {event}\n\n".encode()
        pieces.append(b"%x\r\n%s\r\n" % (len(data), data))
    return pieces


CHUNK = '{"choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": null}]}'
END = '{"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}'


async def _stream_once(backend: OpenAICompatBackend, pool: HttpPool) -> list[object]:
    assert pool is backend.http
    request = ChatRequest(messages=[{"role": "user", "content": "hello"}])
    return [type(e) for e in [e async for e in backend.stream(request)]]


async def test_streams_reuse_their_connection_after_done() -> None:
    """After ``[DONE]`` the stream's last chunk is read, so the next streamed request reuses the connection."""
    answers = [[*_sse(CHUNK, END, "[DONE]"), b"0\r\n\r\n"] for _ in range(3)]
    async with raw_server(answers) as (server, url):
        backend = OpenAICompatBackend(base_url=url, model="m", dialect="vllm", parse="server", timeout_s=5)
        pool = backend.http
        for _ in range(3):
            assert await _stream_once(backend, pool) == [ContentDelta, Finish]
        assert (server.connections, len(server.requests)) == (1, 3)
        await pool.aclose()
        await backend.aclose()


async def test_stream_whose_end_does_not_follow_done_is_closed_not_reused() -> None:
    """An upstream that keeps the body open after ``[DONE]`` still gives the whole turn; its connection is closed
    after the drain limit and the next request opens a new one."""
    answers = [[*_sse(CHUNK, END, "[DONE]"), PAUSE, b"0\r\n\r\n"], [*_sse(CHUNK, END, "[DONE]"), b"0\r\n\r\n"]]
    async with raw_server(answers) as (server, url):
        backend = OpenAICompatBackend(base_url=url, model="m", dialect="vllm", parse="server", timeout_s=5)
        pool = backend.http
        pool.drain_s = 0.1
        assert await _stream_once(backend, pool) == [ContentDelta, Finish]
        assert pool.idle == []
        assert await _stream_once(backend, pool) == [ContentDelta, Finish]
        assert server.connections == 2
        await pool.aclose()
        await backend.aclose()


COMPLETION = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}'
BUSY = b"HTTP/1.1 503 Busy\r\ncontent-type: application/json\r\nretry-after: 0\r\ncontent-length: 2\r\n\r\n{}"


async def test_max_retries_tries_a_busy_upstream_again() -> None:
    """With max_retries=1 a 503 (Retry-After: 0) is sent again and the second answer is the turn; without, it fails."""
    request = ChatRequest(messages=[{"role": "user", "content": "hello"}])
    async with raw_server([[BUSY], [head(f"content-length: {len(COMPLETION)}\r\n") + COMPLETION]]) as (server, url):
        backend = OpenAICompatBackend(base_url=url, model="m", dialect="vllm", max_retries=1, timeout_s=5)
        events = [type(e) for e in [e async for e in backend.complete(request)]]
        assert (events, len(server.requests)) == ([ContentDelta, Finish], 2)
        await backend.aclose()
    async with raw_server([[BUSY]]) as (server, url):
        backend = OpenAICompatBackend(base_url=url, model="m", dialect="vllm", timeout_s=5)
        with pytest.raises(ProviderError) as info:
            _ = [e async for e in backend.complete(request)]
        assert (info.value.status, len(server.requests)) == (503, 1)
        await backend.aclose()


async def test_https_upstream_is_the_same_exchange_over_tls(tmp_path: Path) -> None:
    """An https:// upstream (a self-signed certificate trusted by the pool) answers and keeps its connection."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("needs the openssl command to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    make = [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert)]
    make += ["-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"]
    subprocess.run(make, check=True, capture_output=True)
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    state = RawServer([[head("transfer-encoding: chunked\r\n"), CHUNKED] for _ in range(2)])
    server = await asyncio.start_server(state.handle, "127.0.0.1", 0, ssl=served)
    port = server.sockets[0].getsockname()[1]
    pool = HttpPool(f"https://localhost:{port}/v1", timeout_s=5, tls=ssl.create_default_context(cafile=cert))
    try:
        for _ in range(2):
            assert await (await pool.post("/chat/completions", b"{}")).read() == b"hello, world"
        assert state.connections == 1
    finally:
        await pool.aclose()
        server.close()
