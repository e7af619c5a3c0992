"""fetch_url against a real HTTP server on 127.0.0.1, allowed only through allow_loopback."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tooldispatch.dispatch import Dispatcher, Registry
from tooldispatch.errors import ToolError
from tooldispatch.tools.web import Fetcher, register_fetcher

pytestmark = pytest.mark.integration


DRIP_BYTES = 15
DRIP_GAP_S = 0.2


class _Handler(BaseHTTPRequestHandler):
    def _drip(self, text: bytes) -> None:
        for i in range(len(text)):
            time.sleep(DRIP_GAP_S)
            try:
                self.wfile.write(text[i : i + 1])
                self.wfile.flush()
            except OSError:  # the client hung up
                return

    def do_GET(self) -> None:
        if self.path == "/drip-body":
            self.wfile.write(f"HTTP/1.1 200 OK\r\nContent-Length: {DRIP_BYTES}\r\n\r\n".encode())
            self._drip(b"x" * DRIP_BYTES)
            return
        if self.path == "/drip-headers":
            self._drip(b"HTTP/1.1 200 OK\r\nX-Slow: " + b"y" * DRIP_BYTES)
            return
        routes = {
            "/hello": (200, {"Content-Type": "text/plain; charset=utf-8"}, "héllo".encode()),
            "/big": (200, {"Content-Type": "text/plain"}, b"x" * 5000),
            "/to-hello": (302, {"Location": "/hello"}, b""),
            "/to-metadata": (302, {"Location": "http://169.254.169.254/latest/"}, b""),
            "/loop": (302, {"Location": "/loop"}, b""),
        }
        status, headers, body = routes.get(self.path, (404, {"Content-Type": "text/plain"}, b"not here"))
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_loopback_refused_by_default(base_url: str) -> None:
    """Without allow_loopback the local server is never contacted."""
    with pytest.raises(ToolError, match=r"a loopback address; only public hosts can be fetched$"):
        Fetcher().fetch_url(base_url + "/hello")


def test_fetch_with_allow_loopback(base_url: str) -> None:
    """With allow_loopback the page is fetched and decoded with its charset."""
    assert Fetcher(allow_loopback=True, timeout_s=5).fetch_url(base_url + "/hello") == {
        "url": base_url + "/hello",
        "status": 200,
        "content_type": "text/plain; charset=utf-8",
        "body": "héllo",
        "truncated": False,
    }


def test_redirect_followed_and_rechecked(base_url: str) -> None:
    """A redirect inside the allowed range is followed; one to a link-local address is refused."""
    fetcher = Fetcher(allow_loopback=True, timeout_s=5)
    assert fetcher.fetch_url(base_url + "/to-hello")["url"] == base_url + "/hello"
    with pytest.raises(ToolError, match=r"^refused to fetch '169.254.169.254'.*link-local"):
        fetcher.fetch_url(base_url + "/to-metadata")


def test_redirect_loop_stops(base_url: str) -> None:
    """A redirect loop ends with an error after max_redirects hops."""
    with pytest.raises(ToolError, match=r"^more than 2 redirects starting at"):
        Fetcher(allow_loopback=True, max_redirects=2, timeout_s=5).fetch_url(base_url + "/loop")


def test_body_size_limit(base_url: str) -> None:
    """A body over max_bytes comes back cut, marked truncated."""
    result = Fetcher(allow_loopback=True, max_bytes=100, timeout_s=5).fetch_url(base_url + "/big")
    assert (len(result["body"]), result["truncated"]) == (100, True)


def test_http_error_status_is_a_result(base_url: str) -> None:
    """A 404 page is returned as a result with its status, not raised."""
    result = Fetcher(allow_loopback=True, timeout_s=5).fetch_url(base_url + "/missing")
    assert (result["status"], result["body"]) == (404, "not here")


def test_connection_refused_is_before_execution() -> None:
    """A closed port is a connection-refused failure marked as before execution."""
    with pytest.raises(ToolError) as info:
        Fetcher(allow_loopback=True, timeout_s=5).fetch_url("http://127.0.0.1:9/")
    assert str(info.value) == "connection to 127.0.0.1:9 refused"
    assert info.value.before_execution is True


@pytest.mark.parametrize("path", ["/drip-body", "/drip-headers"])
def test_fault4_timeout_bounds_the_whole_fetch(base_url: str, path: str) -> None:
    """Fault 4: a server sending one byte every 0.2 s (3 s in all) is cut off at the fetch's 0.6 s timeout."""
    url = base_url + path
    with pytest.raises(ToolError) as info:
        Fetcher(allow_loopback=True, timeout_s=0.6).fetch_url(url)
    assert str(info.value) == f"fetching {url} took longer than 0.6 s and was cut off"
    assert info.value.retryable is True


def test_fault4_dripping_server_through_the_dispatcher_ends_the_tool(base_url: str) -> None:
    """Fault 4: through the dispatcher the fetch ends itself before the tool's timer, so no thread is left
    behind: the call fails as a tool error (tried twice, read-only), not as a timeout."""
    registry = register_fetcher(Registry(), Fetcher(allow_loopback=True, timeout_s=0.6))
    d = Dispatcher(registry, store=":memory:", sleep=_no_sleep)
    result = d.dispatch("fetch_url", {"url": base_url + "/drip-body"}, session_id="s")
    assert (result.status, result.reason, result.trace.attempts, result.trace.possibly_running) == (
        "error",
        "tool_error",
        2,
        False,
    )
    d.close()


async def _no_sleep(delay: float) -> None:
    return None
