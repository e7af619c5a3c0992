"""``fetch_url``: an HTTP(S) GET that refuses to reach private, loopback, link-local or reserved hosts.

The host is resolved once; every address it resolves to is checked with :mod:`ipaddress` (an IPv6
address that carries an IPv4 one, IPv4-mapped, 6to4, Teredo or NAT64, is also checked as that IPv4
address), and the connection then goes to the checked address itself, so a second DNS answer cannot
point the request somewhere else. Redirects are followed by hand, each hop checked the same way. Only
``http`` and ``https`` are accepted; a host name that is not a valid DNS name is a permanent refusal.
``timeout_s`` bounds the whole fetch, redirects included: at the deadline the connection is shut down.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from tooldispatch.errors import ToolError

if TYPE_CHECKING:
    from tooldispatch.dispatch import Registry

Resolver = Callable[[str, int], list[str]]
"""Maps ``(host, port)`` to the IP addresses a connection could reach."""

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_REDIRECTS = frozenset({301, 302, 303, 307, 308})


def system_resolver(host: str, port: int) -> list[str]:
    """Resolve ``host`` with the system resolver and return every distinct address."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


_NAT64 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))


def embedded_ipv4(addr: IPAddress) -> list[tuple[str, ipaddress.IPv4Address]]:
    """The IPv4 addresses an IPv6 address carries, each with the form that carries it.

    IPv4-mapped (``::ffff:a.b.c.d``), 6to4 (``2002:AABB:CCDD::``), Teredo (``2001:0::/32``: server and
    client) and NAT64 (``64:ff9b::/96`` and ``64:ff9b:1::/48``, the IPv4 in the last 32 bits).
    """
    if not isinstance(addr, ipaddress.IPv6Address):
        return []
    found: list[tuple[str, ipaddress.IPv4Address]] = []
    if addr.ipv4_mapped is not None:
        found.append(("IPv4-mapped", addr.ipv4_mapped))
    if addr.sixtofour is not None:
        found.append(("6to4", addr.sixtofour))
    if addr.teredo is not None:
        found.extend(("Teredo", v4) for v4 in addr.teredo)
    if any(addr in net for net in _NAT64):
        found.append(("NAT64", ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)))
    return found


def address_problem(addr: IPAddress, *, allow_loopback: bool = False, allow_private: bool = False) -> str | None:
    """Say why an address must not be reached, or ``None`` when it may.

    An IPv6 address that carries an IPv4 address (IPv4-mapped, 6to4, Teredo, NAT64) is refused when the
    IPv4 address it carries is, and is then checked as itself too.

    Args:
        addr: the address.
        allow_loopback: accept 127.0.0.0/8 and ::1.
        allow_private: accept private ranges (10/8, 172.16/12, 192.168/16, fc00::/7, 100.64/10 ...).

    Returns:
        A short reason ("loopback", "link-local" ...) or ``None``.
    """
    for _form, inner in embedded_ipv4(addr):
        problem = address_problem(inner, allow_loopback=allow_loopback, allow_private=allow_private)
        if problem is not None:
            return problem
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    if addr.is_loopback:
        return None if allow_loopback else "loopback"
    if addr.is_link_local:
        return "link-local"
    if addr.is_unspecified:
        return "unspecified"
    if addr.is_multicast:
        return "multicast"
    if addr.is_reserved:
        return "reserved"
    shared = isinstance(addr, ipaddress.IPv4Address) and addr in ipaddress.IPv4Network("100.64.0.0/10")
    if addr.is_private or shared or not addr.is_global:
        return None if allow_private else "private"
    return None


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host: str, port: int, address: str, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._address = address
        self._context = context

    def connect(self) -> None:
        raw = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(raw, server_hostname=self.host)


def _is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


class _Watchdog:
    """Ends a whole fetch at its deadline: shuts the open connection's socket down, which ends a blocked read.

    A socket timeout bounds one read; a server sending a byte at a time keeps each read short, so the
    request as a whole needs a deadline of its own.
    """

    def __init__(self, timeout_s: float) -> None:
        self.deadline = time.monotonic() + timeout_s
        self.expired = False
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(timeout_s, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def remaining(self) -> float:
        return max(self.deadline - time.monotonic(), 0.001)

    def watch(self, conn: http.client.HTTPConnection | None) -> None:
        with self._lock:
            self._conn = conn
            if self.expired and conn is not None:
                _shut(conn)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            if self._conn is not None:
                _shut(self._conn)

    def cancel(self) -> None:
        self._timer.cancel()


def _shut(conn: http.client.HTTPConnection) -> None:
    sock = conn.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


class Fetcher:
    """Fetches web pages for an agent without letting it reach internal services.

    Args:
        allow_loopback: accept 127.0.0.0/8 and ::1 (for tests against a local server).
        allow_private: accept private and shared address ranges (an intranet deployment).
        timeout_s: the most seconds one ``fetch_url`` takes in all (connects, redirects, reads); a fetch
            still going at this deadline is cut off with a ``ToolError``.
        max_bytes: the most body bytes returned; longer bodies come back cut, with ``truncated``.
        max_redirects: how many redirects are followed, each checked like the first URL.
        resolver: resolves a host to addresses; the system resolver by default.
    """

    def __init__(
        self,
        *,
        allow_loopback: bool = False,
        allow_private: bool = False,
        timeout_s: float = 10.0,
        max_bytes: int = 512 * 1024,
        max_redirects: int = 3,
        resolver: Resolver = system_resolver,
    ) -> None:
        self.allow_loopback = allow_loopback
        self.allow_private = allow_private
        self.timeout_s = timeout_s
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self._resolver = resolver

    def check(self, url: str) -> tuple[str, str, int, str, str]:
        """Check a URL and pick the address to connect to.

        Args:
            url: the URL to check.

        Returns:
            ``(scheme, host, port, path_and_query, address)``.

        Raises:
            ToolError: the scheme is not http/https, the URL has no host or carries credentials, the host
                does not resolve, or any of its addresses is refused.
        """
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https"):
            raise ToolError(f"only http and https URLs can be fetched, not {scheme or 'no scheme'!r}", retryable=False)
        if parts.username is not None or parts.password is not None:
            raise ToolError("URLs with credentials in them are refused; pass a URL without 'user:pass@'", status=400)
        host = parts.hostname
        if not host:
            raise ToolError(f"the URL {url!r} has no host", retryable=False, status=400)
        if not _is_ip_literal(host):
            try:
                host.encode("idna")
            except UnicodeError as exc:
                raise ToolError(
                    f"the URL {url!r} has an invalid host name ({exc}); each dot-separated part of a host name "
                    "is 1 to 63 characters",
                    retryable=False,
                    status=400,
                ) from None
        try:
            port = parts.port or (443 if scheme == "https" else 80)
        except ValueError:
            raise ToolError(f"the URL {url!r} has an invalid port", retryable=False, status=400) from None
        try:
            addresses = [ipaddress.ip_address(host)]
        except ValueError:
            try:
                addresses = [ipaddress.ip_address(a.split("%", 1)[0]) for a in self._resolver(host, port)]
            except UnicodeError as exc:
                raise ToolError(
                    f"the URL {url!r} has an invalid host name ({exc})", retryable=False, status=400
                ) from None
            except OSError as exc:
                raise ToolError(f"cannot resolve host {host!r}: {exc}", before_execution=True) from exc
        if not addresses:
            raise ToolError(f"host {host!r} resolved to no address", before_execution=True)
        for addr in addresses:
            problem = address_problem(addr, allow_loopback=self.allow_loopback, allow_private=self.allow_private)
            if problem is not None:
                carried = [
                    f"{form} form of {inner}"
                    for form, inner in embedded_ipv4(addr)
                    if form != "IPv4-mapped"
                    and address_problem(inner, allow_loopback=self.allow_loopback, allow_private=self.allow_private)
                    is not None
                ]
                where = f" ({carried[0]})" if carried else ""
                raise ToolError(
                    f"refused to fetch {host!r}: it resolves to {addr}{where}, a {problem} address; only public "
                    "hosts can be fetched",
                    retryable=False,
                    status=403,
                )
        target = parts.path or "/"
        if parts.query:
            target += "?" + parts.query
        return scheme, host, port, target, str(addresses[0])

    def _get(self, url: str, watchdog: _Watchdog) -> tuple[http.client.HTTPResponse, http.client.HTTPConnection]:
        scheme, host, port, target, address = self.check(url)
        conn: http.client.HTTPConnection
        if scheme == "https":
            conn = _PinnedHTTPSConnection(host, port, address, watchdog.remaining(), ssl.create_default_context())
        else:
            conn = _PinnedHTTPConnection(host, port, address, watchdog.remaining())
        watchdog.watch(conn)
        try:
            conn.request("GET", target, headers={"User-Agent": "tooldispatch-fetch/0.1", "Accept": "*/*"})
            watchdog.watch(conn)  # the socket exists now
            return conn.getresponse(), conn
        except ConnectionRefusedError as exc:
            conn.close()
            raise ToolError(f"connection to {host}:{port} refused", retryable=True, before_execution=True) from exc
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            if watchdog.expired:
                raise self._too_slow(url) from None
            raise ToolError(f"fetching {url} failed: {exc}", retryable=True) from exc

    def _too_slow(self, url: str) -> ToolError:
        return ToolError(f"fetching {url} took longer than {self.timeout_s:g} s and was cut off", retryable=True)

    def fetch_url(self, url: str) -> dict[str, Any]:
        """Fetch a public web page with an HTTP GET.

        Args:
            url: an http or https URL of a public host.

        Returns:
            The final URL, the HTTP status, the content type, the body as text (at most the size
            limit) and whether the body was cut.
        """
        watchdog = _Watchdog(self.timeout_s)
        try:
            return self._fetch(url, watchdog)
        finally:
            watchdog.cancel()

    def _fetch(self, url: str, watchdog: _Watchdog) -> dict[str, Any]:
        current = url
        for _ in range(self.max_redirects + 1):
            response, conn = self._get(current, watchdog)
            try:
                location = response.getheader("Location")
                if response.status in _REDIRECTS and location:
                    current = urljoin(current, location)
                    continue
                try:
                    body = response.read(self.max_bytes + 1)
                except (OSError, http.client.HTTPException) as exc:
                    if watchdog.expired:
                        raise self._too_slow(url) from None
                    raise ToolError(f"reading {current} failed: {exc}", retryable=True) from exc
                content_type = response.getheader("Content-Type") or ""
                status = response.status
            finally:
                watchdog.watch(None)
                conn.close()
            if watchdog.expired:
                raise self._too_slow(url)
            charset = response.headers.get_content_charset() or "utf-8"
            try:
                text = body[: self.max_bytes].decode(charset, errors="replace")
            except LookupError:  # a charset name Python does not know
                text = body[: self.max_bytes].decode("utf-8", errors="replace")
            return {
                "url": current,
                "status": status,
                "content_type": content_type,
                "body": text,
                "truncated": len(body) > self.max_bytes,
            }
        raise ToolError(f"more than {self.max_redirects} redirects starting at {url}", retryable=False)


def register_fetcher(registry: Registry, fetcher: Fetcher | None = None) -> Registry:
    """Register ``fetch_url`` as a read-only, concurrency-safe tool.

    Args:
        registry: where to register it.
        fetcher: the fetcher to use; one with the default policy (public hosts only) when omitted.

    Returns:
        The same registry.
    """
    fetcher = fetcher if fetcher is not None else Fetcher()
    registry.register(
        "fetch_url",
        fetcher.fetch_url,
        read_only=True,
        concurrency_safe=True,
        source="tooldispatch.tools.web",
        version="1",
        timeout_s=fetcher.timeout_s + 1,
    )
    return registry
