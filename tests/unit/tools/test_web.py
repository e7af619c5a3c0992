"""fetch_url refuses internal addresses and bad schemes; address checks cover every resolved address."""

from __future__ import annotations

import ipaddress
import json

import pytest

from tooldispatch.errors import ToolError
from tooldispatch.tools.web import Fetcher, address_problem


def _no_dns(host: str, port: int) -> list[str]:
    raise AssertionError(f"resolver called for {host}:{port}")


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("100.64.0.1", "private"),
        ("fd00::1", "private"),
        ("169.254.169.254", "link-local"),
        ("fe80::1", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("93.184.216.34", None),
        ("2606:4700::1111", None),
    ],
)
def test_address_problem(address: str, problem: str | None) -> None:
    """Each kind of internal address is named; a public address passes."""
    assert address_problem(ipaddress.ip_address(address)) == problem


def test_allow_options() -> None:
    """allow_loopback admits loopback only; allow_private admits private ranges but never link-local."""
    lo = ipaddress.ip_address("127.0.0.1")
    private = ipaddress.ip_address("10.0.0.1")
    metadata = ipaddress.ip_address("169.254.169.254")
    assert address_problem(lo, allow_loopback=True) is None
    assert address_problem(private, allow_loopback=True) == "private"
    assert address_problem(private, allow_private=True) is None
    assert address_problem(metadata, allow_private=True, allow_loopback=True) == "link-local"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://127.0.0.1/", "refused to fetch '127.0.0.1': it resolves to 127.0.0.1, a loopback address"),
        ("http://[::1]:8080/x", "refused to fetch '::1': it resolves to ::1, a loopback address"),
        ("http://169.254.169.254/latest/meta-data", "it resolves to 169.254.169.254, a link-local address"),
        ("https://10.0.0.5/", "it resolves to 10.0.0.5, a private address"),
        ("http://0.0.0.0:80/", "it resolves to 0.0.0.0, a unspecified address"),
    ],
)
def test_literal_addresses_refused(url: str, message: str) -> None:
    """URLs naming internal addresses literally are refused without any DNS lookup or connection."""
    with pytest.raises(ToolError) as info:
        Fetcher(resolver=_no_dns).fetch_url(url)
    assert message in str(info.value)
    assert info.value.status == 403
    assert info.value.retryable is False


def test_every_resolved_address_checked() -> None:
    """A host resolving to a public and a private address is refused (the private one is named)."""
    fetcher = Fetcher(resolver=lambda host, port: ["93.184.216.34", "10.0.0.7"])
    with pytest.raises(ToolError, match=r"^refused to fetch 'mixed.example': it resolves to 10.0.0.7, a private"):
        fetcher.fetch_url("http://mixed.example/")


def test_localhost_name_refused() -> None:
    """A name that resolves to loopback is refused like the literal address."""
    fetcher = Fetcher(resolver=lambda host, port: ["127.0.0.1"])
    with pytest.raises(ToolError, match=r"a loopback address"):
        fetcher.fetch_url("http://localhost:9/")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("file:///etc/passwd", "only http and https URLs can be fetched, not 'file'"),
        ("ftp://example.com/x", "only http and https URLs can be fetched, not 'ftp'"),
        ("gopher://example.com/", "only http and https URLs can be fetched, not 'gopher'"),
        ("example.com/page", "only http and https URLs can be fetched, not 'no scheme'"),
        ("http:///path", "the URL 'http:///path' has no host"),
        ("http://user:pw@example.com/", "URLs with credentials in them are refused"),
        ("http://example.com:99999/", "the URL 'http://example.com:99999/' has an invalid port"),
    ],
)
def test_bad_urls_refused(url: str, message: str) -> None:
    """Other schemes, missing hosts, credentials and invalid ports are refused before any lookup."""
    with pytest.raises(ToolError) as info:
        Fetcher(resolver=_no_dns).fetch_url(url)
    assert str(info.value).startswith(message)


def test_unresolvable_host() -> None:
    """A host that does not resolve is a failure before execution (safe to retry)."""

    def fail(host: str, port: int) -> list[str]:
        raise OSError("Name or service not known")

    with pytest.raises(ToolError) as info:
        Fetcher(resolver=fail).fetch_url("http://nowhere.invalid/")
    assert str(info.value) == "cannot resolve host 'nowhere.invalid': Name or service not known"
    assert info.value.before_execution is True


def test_check_pins_address() -> None:
    """check() returns the address the connection will use, so a second DNS answer cannot redirect it."""
    fetcher = Fetcher(resolver=lambda host, port: ["93.184.216.34"])
    assert fetcher.check("https://example.com/a?b=1") == ("https", "example.com", 443, "/a?b=1", "93.184.216.34")


def test_dispatched_refusal_not_retried() -> None:
    """Through the dispatcher, a refused address is reported once as a permanent tool error."""
    from tooldispatch.dispatch import Dispatcher, Registry
    from tooldispatch.tools.web import register_fetcher

    registry = register_fetcher(Registry(), Fetcher(resolver=lambda host, port: ["169.254.169.254"]))
    assert registry["fetch_url"].parallel_safe is True
    d = Dispatcher(registry, store=":memory:")
    result = d.dispatch("fetch_url", {"url": "http://metadata.internal/latest"}, session_id="s")
    envelope = json.loads(result.content)
    assert (result.status, result.reason, result.trace.attempts) == ("error", "tool_error", 1)
    assert envelope["message"] == (
        "fetch_url failed: refused to fetch 'metadata.internal': it resolves to 169.254.169.254, a link-local "
        "address; only public hosts can be fetched (status 403)"
    )
    d.close()


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "http://[2002:a9fe:a9fe::]/",
            "refused to fetch '2002:a9fe:a9fe::': it resolves to 2002:a9fe:a9fe:: (6to4 form of 169.254.169.254), "
            "a link-local address",
        ),
        (
            "http://[2002:7f00:1::]/",
            "refused to fetch '2002:7f00:1::': it resolves to 2002:7f00:1:: (6to4 form of 127.0.0.1), a loopback "
            "address",
        ),
        (
            "http://[2001:0:4136:e378::80ff:fffe]/",
            "refused to fetch '2001:0:4136:e378::80ff:fffe': it resolves to 2001:0:4136:e378::80ff:fffe (Teredo form "
            "of 127.0.0.1), a loopback address",
        ),
        (
            "http://[64:ff9b::a9fe:a9fe]/",
            "refused to fetch '64:ff9b::a9fe:a9fe': it resolves to 64:ff9b::a9fe:a9fe (NAT64 form of "
            "169.254.169.254), a link-local address",
        ),
    ],
)
def test_fault4_ipv6_forms_carrying_refused_ipv4_are_refused(url: str, message: str) -> None:
    """Fault 4: 6to4, Teredo and NAT64 addresses are refused when the IPv4 address they carry is, even when
    private ranges are allowed."""
    with pytest.raises(ToolError) as info:
        Fetcher(resolver=_no_dns, allow_private=True).check(url)
    assert str(info.value) == message + "; only public hosts can be fetched"
    assert (info.value.status, info.value.retryable) == (403, False)


def test_fault4_6to4_of_a_public_address_passes() -> None:
    """Fault 4: a 6to4 address carrying a public IPv4 address is checked and accepted like that address."""
    assert address_problem(ipaddress.ip_address("2002:5db8:d822::1")) is None
    assert Fetcher(resolver=_no_dns).check("http://[2002:5db8:d822::1]/")[4] == "2002:5db8:d822::1"


def test_fault4_overlong_dns_label_is_a_validation_error_not_retried() -> None:
    """Fault 4: a host with a 64-character label is a permanent 400 refusal, reported once, never retried."""
    from tooldispatch.dispatch import Dispatcher, Registry
    from tooldispatch.tools.web import register_fetcher

    url = f"http://{'a' * 64}.example.com/"
    with pytest.raises(ToolError) as info:
        Fetcher(resolver=_no_dns).fetch_url(url)
    assert str(info.value).startswith(f"the URL {url!r} has an invalid host name (")
    assert (info.value.status, info.value.retryable) == (400, False)
    d = Dispatcher(register_fetcher(Registry(), Fetcher(resolver=_no_dns)), store=":memory:")
    result = d.dispatch("fetch_url", {"url": url}, session_id="s")
    assert (result.status, result.reason, result.trace.attempts, result.trace.retried) == (
        "error",
        "tool_error",
        1,
        False,
    )
    d.close()
