"""How a store's address is shown: ``redact`` replaces a URL's password (in the URL or its query) by ``***``.

Every module that names a store in a message or a log uses it; it imports nothing of the stores.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

URL: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
"""A ``scheme://`` prefix: what makes a store target a URL rather than a file path."""


def redact(target: str) -> str:
    """``target`` as it may be shown: a URL's password (in its netloc or query) becomes ``***``."""
    if not URL.match(target):
        return target
    try:
        parts = urlsplit(target)
    except ValueError:
        return target.split("://", 1)[0] + "://***"
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user, sep, _ = userinfo.partition(":")
        netloc = f"{user}:***@{hostport}" if sep else f"{userinfo}@{hostport}"
    query = parts.query
    if query:
        pairs = [(k, "***" if k.lower() == "password" else v) for k, v in parse_qsl(query, keep_blank_values=True)]
        query = urlencode(pairs, safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
