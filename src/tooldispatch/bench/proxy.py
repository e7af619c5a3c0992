"""``tooldispatch bench proxy``: what the proxy adds, against the same scripted upstream called directly.

Three processes, so no two of them share an interpreter lock: a scripted OpenAI-compatible upstream
(``python -m tooldispatch.bench.proxy upstream``), the proxy in front of it (``tooldispatch proxy --base-url
... --dialect llama-server``, client parse mode), and this one, the client. The same requests go to both
paths, interleaved one by one so drift hits both alike:

- latency: the p50 of non-streamed requests with tools, direct and through the proxy (the proxy parses
  the upstream's hermes text into ``tool_calls``), from the request's first byte sent to the answer's last
  byte received; the difference is what the proxy adds (target ≤ 1 ms);
- time to first token: streamed requests, from the request sent to the arrival of the first event that
  carries model output (reasoning, content or a tool call), and of the first that carries content or a tool
  call (target ≤ 2 ms added);
- soak: ``streams`` concurrent streams through the proxy for ``soak_s`` seconds, every answer checked
  byte-exact against the expected content and calls (zero lost or corrupted), and the proxy's resident
  memory sampled every second (flat: the last sample against the one after warm-up).

The client of the measured requests is a plain socket with one kept-alive connection per path (``_Client``):
the times are those of the bytes on the client's socket, with no client library's own work in them, and every
answer is checked (the call, the content, the finish reason) so that a fast wrong answer cannot count.

Timings are printed, never asserted: they are measured side by side in one run on whatever machine runs it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tooldispatch.backends.scripted import ScriptedTurn
from tooldispatch.errors import BackendUnavailable

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    }
]
PROSE = "Checking the forecast for you. " * 8
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}\n</tool_call>'
EXPECTED_CALL = ("get_weather", {"city": "Paris", "unit": "celsius"})
BODY = {"model": "scripted", "messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": TOOLS}


CHUNK_GAP_MS = 1.0
"""The scripted upstream's pause between streamed chunks, as a model's decoding step would make it (1 ms: faster
than any real model). Without it, the upstream writes its ~90 chunks in one burst of a few milliseconds of CPU,
and on a machine with fewer free cores than the three processes, the client's first read waits for a core
while the upstream writes that burst and the proxy reads it: the time to first token then measures the run
queue, not the proxy. ``--chunk-gap-ms 0`` measures that burst anyway."""


def bench_turn(body: Mapping[str, Any]) -> ScriptedTurn:
    """The upstream's answer: a short reasoning, prose, then one hermes call (about 90 chunks when streamed)."""
    return ScriptedTurn(reasoning="The user wants the weather.", content=f"{PROSE}\n{CALL}", chunk=4)


@dataclass
class SoakResult:
    """The concurrent-stream soak through the proxy.

    Attributes:
        streams: concurrent streams.
        seconds: how long they ran.
        completed: answers received whole and exact.
        lost: requests that failed or ended early.
        corrupted: answers received whole but not exact.
        rss_mb: the proxy's resident memory, one sample per second.
        errors: the first few failure messages.
    """

    streams: int
    seconds: float
    completed: int = 0
    lost: int = 0
    corrupted: int = 0
    rss_mb: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass
class ProxyBench:
    """The figures of one run.

    Attributes:
        requests: requests per path and kind.
        direct_ms: non-streamed latencies to the upstream directly, in ms.
        proxied_ms: the same through the proxy.
        direct_ttft_ms: time to the first event carrying model output (reasoning, content or a tool call),
            streamed directly.
        proxied_ttft_ms: the same through the proxy.
        direct_first_content_ms: time to the first event carrying content or a tool call, streamed directly.
        proxied_first_content_ms: the same through the proxy.
        wrong: answers that were not the expected ones, per path (``direct``, ``proxied``), with the first few
            reasons in ``wrong_reasons``.
        proxy_cpu_ms: the proxy process's CPU time per non-streamed request (user + system, from /proc): what it
            costs regardless of how busy the machine is.
        proxy_cpu_stream_ms: the same per streamed request.
        upstream_cpu_ms: the scripted upstream's CPU time per non-streamed request (it answers both paths, so
            this is per request it served): one HTTP server's work, the yardstick for the proxy's two hops.
        upstream_cpu_stream_ms: the same per streamed request.
        chunk_gap_ms: the upstream's pause between streamed chunks.
        soak: the soak, when one ran.
    """

    requests: int
    direct_ms: list[float]
    proxied_ms: list[float]
    direct_ttft_ms: list[float]
    proxied_ttft_ms: list[float]
    direct_first_content_ms: list[float] = field(default_factory=list)
    proxied_first_content_ms: list[float] = field(default_factory=list)
    wrong: dict[str, int] = field(default_factory=lambda: {"direct": 0, "proxied": 0})
    wrong_reasons: list[str] = field(default_factory=list)
    proxy_cpu_ms: float = float("nan")
    proxy_cpu_stream_ms: float = float("nan")
    upstream_cpu_ms: float = float("nan")
    upstream_cpu_stream_ms: float = float("nan")
    chunk_gap_ms: float = CHUNK_GAP_MS
    soak: SoakResult | None = None

    @staticmethod
    def p50(values: list[float]) -> float:
        """The median."""
        return statistics.median(values) if values else float("nan")

    @property
    def added_ms(self) -> float:
        """p50 latency added by the proxy, non-streamed."""
        return self.p50(self.proxied_ms) - self.p50(self.direct_ms)

    @property
    def added_ttft_ms(self) -> float:
        """p50 time to first token added by the proxy."""
        return self.p50(self.proxied_ttft_ms) - self.p50(self.direct_ttft_ms)

    @property
    def added_first_content_ms(self) -> float:
        """p50 time to the first content or tool-call event added by the proxy."""
        return self.p50(self.proxied_first_content_ms) - self.p50(self.direct_first_content_ms)


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait(url: str, process: subprocess.Popen[bytes], what: str, log: Path) -> None:
    import httpx2

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise BackendUnavailable(f"the {what} exited with code {process.returncode}: {log.read_text()[-800:]}")
        try:
            if httpx2.get(url, timeout=1).status_code == 200:
                return
        except httpx2.HTTPError:
            pass
        time.sleep(0.1)
    raise BackendUnavailable(f"the {what} did not answer {url} within 120 s; see {log}")


@contextmanager
def _process(argv: list[str], ready_url: str, what: str, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait(ready_url, process, what, log)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def _cpu_s(pid: int) -> float:
    """User plus system CPU seconds of a process so far (``nan`` where /proc is unavailable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def _delta_kind(event: bytes) -> str | None:
    """``output`` for an SSE event whose delta carries content or a tool call, ``token`` for one that carries only
    reasoning, ``None`` for anything else (the role, an empty content, the finish, ``[DONE]``)."""
    if not event.startswith(b"data: {"):
        return None
    try:
        choices = json.loads(event[6:]).get("choices") or [{}]
    except ValueError:
        return None
    delta = choices[0].get("delta") or {}
    if delta.get("content") or delta.get("tool_calls"):
        return "output"
    if delta.get("reasoning") or delta.get("reasoning_content"):
        return "token"
    return None


@dataclass
class Exchange:
    """One request and its answer as the client's socket saw them.

    Attributes:
        status: the HTTP status.
        body: the answer's body, unframed.
        total_ms: from the request's first byte sent to the answer's last byte received.
        first_token_ms: to the arrival of the first SSE event carrying reasoning, content or a tool call.
        first_output_ms: to the arrival of the first SSE event carrying content or a tool call.
    """

    status: int
    body: bytes
    total_ms: float
    first_token_ms: float | None = None
    first_output_ms: float | None = None


class _Client:
    """A blocking HTTP/1.1 client on one kept-alive socket (``TCP_NODELAY``), timing each answer as it arrives.

    It reads ``Content-Length`` and chunked answers (what uvicorn sends), and notes when each SSE event's
    last byte arrived, so the times are those of the bytes on the socket.
    """

    def __init__(self, url: str, *, timeout_s: float = 30.0) -> None:
        import socket
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        self.host, self.port, self.prefix = parts.hostname or "127.0.0.1", parts.port or 80, parts.path.rstrip("/")
        self.sock = socket.create_connection((self.host, self.port), timeout=timeout_s)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def request(self, path: str, body: Mapping[str, Any]) -> bytes:
        """The bytes of ``POST {prefix}{path}`` with ``body`` as JSON."""
        data = json.dumps(body).encode()
        head = (
            f"POST {self.prefix}{path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
        )
        return head.encode() + data

    def exchange(self, request: bytes) -> Exchange:
        """Send ``request`` and read its whole answer."""
        recv = self.sock.recv
        started = time.perf_counter()
        self.sock.sendall(request)
        raw = bytearray()
        body = bytearray()
        status = 0
        chunked = False
        length = -1
        head_done = False
        scanned = 0  # how much of ``body`` was split into SSE events
        first_token: float | None = None
        first_output: float | None = None
        while True:
            piece = recv(1 << 16)
            now = time.perf_counter()
            if not piece:
                raise ConnectionError("the server closed the connection mid-answer")
            raw += piece
            if not head_done:
                end = raw.find(b"\r\n\r\n")
                if end < 0:
                    continue
                lines = bytes(raw[:end]).decode("latin-1").split("\r\n")
                status = int(lines[0].split(" ", 2)[1])
                headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
                chunked = "chunked" in headers.get("transfer-encoding", "")
                length = int(headers.get("content-length", "-1"))
                del raw[: end + 4]
                head_done = True
            complete = False
            if chunked:
                while (eol := raw.find(b"\r\n")) >= 0:
                    size = int(bytes(raw[:eol]).split(b";")[0], 16)
                    if size == 0:
                        complete = raw.find(b"\r\n\r\n", eol) >= 0
                        break
                    if len(raw) < eol + 2 + size + 2:
                        break
                    body += raw[eol + 2 : eol + 2 + size]
                    del raw[: eol + 2 + size + 2]
            else:
                body += raw
                raw.clear()
                complete = len(body) >= length
            if first_output is None:
                while (sep := body.find(b"\n\n", scanned)) >= 0:
                    kind = _delta_kind(bytes(body[scanned:sep]))
                    scanned = sep + 2
                    if kind is not None and first_token is None:
                        first_token = (now - started) * 1000
                    if kind == "output":
                        first_output = (now - started) * 1000
                        break
            if complete:
                return Exchange(status, bytes(body), (now - started) * 1000, first_token, first_output)

    def close(self) -> None:
        """Close the socket."""
        self.sock.close()


def _stream_chunks(body: bytes) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in body.decode().split("\n") if line.startswith("data: {")]


def check_answer(answer: Mapping[str, Any]) -> str | None:
    """Why a non-streamed answer through the proxy is not exactly the expected one (``None`` when it is)."""
    try:
        message = answer["choices"][0]["message"]
        calls = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in message["tool_calls"]]
        finish = answer["choices"][0]["finish_reason"]
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        return f"not a chat completion with tool calls ({type(exc).__name__}: {exc})"
    if calls != [EXPECTED_CALL]:
        return f"calls {calls!r}"
    if (message.get("content") or "").strip() != PROSE.strip():
        return f"content {(message.get('content') or '')[:80]!r}"
    if finish != "tool_calls":
        return f"finish reason {finish!r}"
    return None


def check_stream(chunks: list[dict[str, Any]]) -> str | None:
    """Why a streamed answer through the proxy is not exactly the expected one (``None`` when it is)."""
    content: list[str] = []
    calls: dict[int, list[str]] = {}
    finish: str | None = None
    for chunk in chunks:
        if "error" in chunk:
            return f"error event: {chunk['error']}"
        for choice in chunk.get("choices", []):
            delta = choice.get("delta", {})
            content.append(delta.get("content") or "")
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(call["index"], ["", ""])
                slot[0] += call["function"].get("name") or ""
                slot[1] += call["function"].get("arguments") or ""
            finish = choice.get("finish_reason") or finish
    got = [(name, json.loads(args)) for name, args in (calls[i] for i in sorted(calls))]
    if got != [EXPECTED_CALL]:
        return f"calls {got!r}"
    if "".join(content).strip() != PROSE.strip():
        return f"content {''.join(content)[:80]!r}"
    if finish != "tool_calls":
        return f"finish reason {finish!r}"
    return None


def _measure(
    direct: str, proxied: str, requests: int, progress: Callable[[str], None], pid: int, upstream_pid: int
) -> ProxyBench:
    bench = ProxyBench(requests, [], [], [], [])
    clients = {"direct": _Client(direct), "proxied": _Client(proxied)}
    plain = {name: c.request("/chat/completions", BODY) for name, c in clients.items()}
    streamed = {name: c.request("/chat/completions", {**BODY, "stream": True}) for name, c in clients.items()}

    def wrong(path: str, why: str) -> None:
        bench.wrong[path] += 1
        if len(bench.wrong_reasons) < 5:
            bench.wrong_reasons.append(f"{path}: {why}")

    def plain_answer(path: str) -> float:
        answer = clients[path].exchange(plain[path])
        if answer.status != 200:
            wrong(path, f"status {answer.status}: {answer.body[:120]!r}")
        elif path == "proxied" and (why := check_answer(json.loads(answer.body))) is not None:
            wrong(path, why)
        return answer.total_ms

    def streamed_answer(path: str) -> Exchange:
        answer = clients[path].exchange(streamed[path])
        if answer.status != 200 or not answer.body.endswith(b"data: [DONE]\n\n"):
            wrong(path, f"status {answer.status}, ends {answer.body[-40:]!r}")
        elif path == "proxied" and (why := check_stream(_stream_chunks(answer.body))) is not None:
            wrong(path, why)
        elif answer.first_token_ms is None or answer.first_output_ms is None:
            wrong(path, "no event with output")
        return answer

    try:
        for _ in range(20):  # warm-up: connections, imports, the parser's compiled patterns
            for path in clients:
                plain_answer(path)
                streamed_answer(path)
        progress(f"{requests} non-streamed requests per path")
        cpu, up_cpu = _cpu_s(pid), _cpu_s(upstream_pid)
        for _ in range(requests):
            bench.direct_ms.append(plain_answer("direct"))
            bench.proxied_ms.append(plain_answer("proxied"))
        bench.proxy_cpu_ms = (_cpu_s(pid) - cpu) * 1000 / requests
        bench.upstream_cpu_ms = (_cpu_s(upstream_pid) - up_cpu) * 1000 / (2 * requests)
        progress(f"{requests} streamed requests per path")
        cpu, up_cpu = _cpu_s(pid), _cpu_s(upstream_pid)
        sinks = {
            "direct": (bench.direct_ttft_ms, bench.direct_first_content_ms),
            "proxied": (bench.proxied_ttft_ms, bench.proxied_first_content_ms),
        }
        for _ in range(requests):
            for path, (tokens, outputs) in sinks.items():
                answer = streamed_answer(path)
                if answer.first_token_ms is not None and answer.first_output_ms is not None:
                    tokens.append(answer.first_token_ms)
                    outputs.append(answer.first_output_ms)
        bench.proxy_cpu_stream_ms = (_cpu_s(pid) - cpu) * 1000 / requests
        bench.upstream_cpu_stream_ms = (_cpu_s(upstream_pid) - up_cpu) * 1000 / (2 * requests)
    finally:
        for client in clients.values():
            client.close()
    return bench


async def _soak(proxied: str, pid: int, streams: int, seconds: float, progress: Callable[[str], None]) -> SoakResult:
    import httpx2

    result = SoakResult(streams=streams, seconds=seconds)
    body = {**BODY, "stream": True}
    stop = float("inf")  # set once the client is ready; each worker streams at least once, however loaded

    async def worker(client: httpx2.AsyncClient) -> None:
        first = True
        while first or time.monotonic() < stop:
            first = False
            try:
                async with client.stream("POST", f"{proxied}/chat/completions", json=body) as response:
                    lines = [line async for line in response.aiter_lines() if line]
                if response.status_code != 200 or not lines or lines[-1] != "data: [DONE]":
                    result.lost += 1
                    if len(result.errors) < 5:
                        result.errors.append(f"status {response.status_code}, last line {lines[-1:]!r}")
                    continue
                chunks = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
                why = check_stream(chunks)
                if why is None:
                    result.completed += 1
                else:
                    result.corrupted += 1
                    if len(result.errors) < 5:
                        result.errors.append(why)
            except (httpx2.HTTPError, ValueError) as exc:
                result.lost += 1
                if len(result.errors) < 5:
                    result.errors.append(f"{type(exc).__name__}: {exc}")

    async def sample() -> None:
        while time.monotonic() < stop:
            result.rss_mb.append(_rss_mb(pid))
            await asyncio.sleep(1.0)
        result.rss_mb.append(_rss_mb(pid))

    progress(f"{streams} concurrent streams for {seconds:g} s")
    limits = httpx2.Limits(max_connections=streams + 4, max_keepalive_connections=streams + 4)
    async with httpx2.AsyncClient(timeout=60, limits=limits) as client:
        stop = time.monotonic() + seconds
        await asyncio.gather(sample(), *(worker(client) for _ in range(streams)))
    return result


def run_bench(
    *,
    requests: int = 400,
    streams: int = 64,
    soak_s: float = 60.0,
    loop: str = "auto",
    chunk_gap_ms: float = CHUNK_GAP_MS,
    progress: Callable[[str], None] | None = None,
) -> ProxyBench:
    """Start the upstream and the proxy, measure both paths side by side, then soak the proxy.

    ``chunk_gap_ms`` is the upstream's pause between streamed chunks (``CHUNK_GAP_MS``).

    Raises:
        BackendUnavailable: the upstream or the proxy did not start.
    """
    say = progress or (lambda _: None)
    with tempfile.TemporaryDirectory(prefix="tooldispatch-bench-proxy-") as tmp:
        folder = Path(tmp)
        up_port, proxy_port = _free_port(), _free_port()
        upstream_url, proxy_url = f"http://127.0.0.1:{up_port}/v1", f"http://127.0.0.1:{proxy_port}/v1"
        python = sys.executable
        upstream_argv = [python, "-m", "tooldispatch.bench.proxy", "upstream", "--port", str(up_port)]
        upstream_argv += ["--chunk-gap-ms", str(chunk_gap_ms)]
        proxy_argv = [
            python, "-m", "tooldispatch", "proxy", "--base-url", upstream_url, "--dialect", "llama-server",
            "--served-model", "scripted", "--port", str(proxy_port), "--store", str(folder / "state.db"),
            "--log-level", "warning", "--loop", loop,
        ]  # fmt: skip
        say("starting the scripted upstream and the proxy")
        with (
            _process(upstream_argv, f"{upstream_url}/models", "scripted upstream", folder / "upstream.log") as up,
            _process(proxy_argv, f"http://127.0.0.1:{proxy_port}/health", "proxy", folder / "proxy.log") as proxy,
        ):
            bench = _measure(upstream_url, proxy_url, requests, say, proxy.pid, up.pid)
            bench.chunk_gap_ms = chunk_gap_ms
            if soak_s > 0 and streams > 0:
                bench.soak = asyncio.run(_soak(proxy_url, proxy.pid, streams, soak_s, say))
    return bench


def print_report(bench: ProxyBench, console: Any) -> None:
    """Print the figures as a ``rich`` table, with the targets next to them."""
    from rich.table import Table

    table = Table(
        title=f"proxy against the same scripted upstream called directly ({bench.requests} requests per path; "
        f"{bench.chunk_gap_ms:g} ms between streamed chunks)"
    )
    for column in ("measure", "direct p50", "proxied p50", "added", "target"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    table.add_row(
        "latency, non-streamed with tools",
        f"{bench.p50(bench.direct_ms):.3f} ms",
        f"{bench.p50(bench.proxied_ms):.3f} ms",
        f"{bench.added_ms:.3f} ms",
        "≤ 1 ms",
    )
    table.add_row(
        "time to first token (reasoning, content or call), streamed",
        f"{bench.p50(bench.direct_ttft_ms):.3f} ms",
        f"{bench.p50(bench.proxied_ttft_ms):.3f} ms",
        f"{bench.added_ttft_ms:.3f} ms",
        "≤ 2 ms",
    )
    table.add_row(
        "time to first content or tool-call delta, streamed",
        f"{bench.p50(bench.direct_first_content_ms):.3f} ms",
        f"{bench.p50(bench.proxied_first_content_ms):.3f} ms",
        f"{bench.added_first_content_ms:.3f} ms",
        "≤ 2 ms",
    )
    console.print(table)
    console.print(
        f"answers not as expected: {bench.wrong['direct']} direct, {bench.wrong['proxied']} through the proxy"
        + "".join(f"\n  {why}" for why in bench.wrong_reasons)
    )
    console.print(
        f"CPU time per request: proxy {bench.proxy_cpu_ms:.3f} ms non-streamed, {bench.proxy_cpu_stream_ms:.3f} ms "
        f"streamed (about 90 chunks); the scripted upstream {bench.upstream_cpu_ms:.3f} ms and "
        f"{bench.upstream_cpu_stream_ms:.3f} ms"
    )
    soak = bench.soak
    if soak is None:
        return
    rss = [r for r in soak.rss_mb if r == r]
    warm = rss[min(5, len(rss) - 1)] if rss else float("nan")
    console.print(
        f"soak: {soak.streams} concurrent streams for {soak.seconds:g} s: {soak.completed} answers exact, "
        f"{soak.lost} lost, {soak.corrupted} corrupted; proxy RSS {rss[0] if rss else float('nan'):.1f} MB at start, "
        f"{warm:.1f} MB after warm-up, {rss[-1] if rss else float('nan'):.1f} MB at the end, "
        f"{max(rss) if rss else float('nan'):.1f} MB at most"
    )
    if rss:
        console.print("  RSS every 5 s (MB): " + " ".join(f"{r:.1f}" for r in rss[::5]))
    for error in soak.errors:
        console.print(f"  {error}")


def _serve_upstream(port: int, chunk_gap_ms: float) -> None:
    import uvicorn

    from tooldispatch.proxy.scripted import ScriptedServer

    server = ScriptedServer(bench_turn, keep_requests=False, delay_s=chunk_gap_ms / 1000)
    uvicorn.run(server.app(), host="127.0.0.1", port=port, log_level="warning", access_log=False)


def main(argv: list[str] | None = None) -> None:
    """``python -m tooldispatch.bench.proxy upstream --port N [--chunk-gap-ms MS]``: the benchmark's upstream."""
    parser = argparse.ArgumentParser(prog="python -m tooldispatch.bench.proxy")
    parser.add_argument("role", choices=["upstream"])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--chunk-gap-ms", type=float, default=CHUNK_GAP_MS)
    args = parser.parse_args(argv)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    _serve_upstream(args.port, args.chunk_gap_ms)


if __name__ == "__main__":
    main()
