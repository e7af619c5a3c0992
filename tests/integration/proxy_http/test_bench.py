"""A short, bounded run of ``tooldispatch bench proxy``: both paths answer, and the soak loses nothing."""

from __future__ import annotations

import pytest

from tooldispatch.bench.proxy import run_bench

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def test_short_bench_measures_both_paths_and_loses_no_stream() -> None:
    """Every request is measured on both paths and answered exactly; 4 streams for 2 s through the proxy are all
    exact."""
    bench = run_bench(requests=10, streams=4, soak_s=2.0)
    assert len(bench.direct_ms) == len(bench.proxied_ms) == 10
    assert len(bench.direct_ttft_ms) == len(bench.proxied_ttft_ms) == 10
    assert len(bench.direct_first_content_ms) == len(bench.proxied_first_content_ms) == 10
    assert (bench.wrong, bench.wrong_reasons) == ({"direct": 0, "proxied": 0}, [])
    assert all(c >= t for c, t in zip(bench.proxied_first_content_ms, bench.proxied_ttft_ms, strict=True))
    assert bench.soak is not None
    assert (bench.soak.lost, bench.soak.corrupted, bench.soak.errors) == (0, 0, [])
    assert bench.soak.completed >= 4
    assert len(bench.soak.rss_mb) >= 2


def test_client_times_the_first_token_and_the_first_content_apart() -> None:
    """The bench's socket client reads a chunked SSE answer whole and notes the reasoning event before the first
    content event."""
    import socket
    import threading

    from tooldispatch.bench.proxy import _Client

    events = [
        b'data: {"choices": [{"delta": {"role": "assistant", "content": ""}}]}\n\n',
        b'data: {"choices": [{"delta": {"reasoning": "hm"}}]}\n\n',
        b'data: {"choices": [{"delta": {"content": "hi"}}]}\n\n',
        b"data: [DONE]\n\n",
    ]
    answer = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    answer += b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            for i in range(0, len(answer), 7):  # small pieces: framing split anywhere
                conn.sendall(answer[i : i + 7])

    thread = threading.Thread(target=serve)
    thread.start()
    client = _Client(f"http://127.0.0.1:{server.getsockname()[1]}/v1")
    try:
        got = client.exchange(client.request("/chat/completions", {"stream": True}))
    finally:
        client.close()
        thread.join()
        server.close()
    assert (got.status, got.body) == (200, b"".join(events))
    assert got.first_token_ms is not None and got.first_output_ms is not None
    assert got.first_token_ms <= got.first_output_ms <= got.total_ms
