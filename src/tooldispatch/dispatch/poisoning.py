"""Scan tool descriptions for poisoning: text aimed at the model rather than describing the tool.

Four families are flagged (each finding is ``"<kind>: <excerpt>"``):

- ``override_instructions``: "ignore all/previous instructions", "disregard prior instructions", ...
- ``calls_other_tools``: instructions to call or invoke another tool ("before using this tool, call X").
- ``exfiltration``: sending or posting data to a URL or an e-mail address, reading credentials
  (``~/.ssh``, ``id_rsa``, ``.env``), or hiding the action from the user ("do not tell the user").
- ``hidden_unicode``: zero-width characters, bidirectional controls and Unicode tag characters, which a
  person reviewing the description cannot see.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

_FLAGS = re.IGNORECASE | re.DOTALL

_OVERRIDE = re.compile(
    r"\b(ignore|disregard|forget|override)\s+(all|any|every|previous|prior|earlier|the\s+above|above|your)"
    r"(\s+(previous|prior|earlier|other|system))?\s+(instructions|rules|prompts?|guidelines|directions)",
    _FLAGS,
)
_CALLS = re.compile(
    r"\b(call|invoke|run|execute|use)\s+(the\s+|another\s+|other\s+)?[`'\"]?[\w.-]+[`'\"]?\s+(tool|function)s?\b"
    r"|\b(before|after)\s+(using|calling|running)\s+this\s+tool\b[^.]{0,60}\b(call|invoke|run|use|read)\b",
    _FLAGS,
)
_EXFIL = re.compile(
    r"\b(send|post|upload|forward|email|e-mail|transmit|exfiltrate|leak|copy)\b[^.]{0,80}?"
    r"(https?://\S+|[\w.+-]+@[\w-]+\.[\w.]+)"
    r"|\b(do\s+not|don't|never)\s+(tell|inform|mention|notify|alert|show)\s+(this\s+to\s+)?the\s+user"
    r"|\bwithout\s+(telling|informing|notifying|alerting)\s+the\s+user"
    r"|\b(keep|hide)\s+(this|it)\s+(secret|hidden)\b"
    r"|~/\.ssh|\bid_rsa\b|\.aws/credentials|(^|[\s/])\.env\b",
    _FLAGS,
)
_HIDDEN = re.compile("[\u00ad\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\U000e0000-\U000e007f]")


def _excerpt(text: str, match: re.Match[str]) -> str:
    return " ".join(text[match.start() : match.end()].split())[:80]


def scan_text(text: str) -> list[str]:
    """Return the poisoning findings in one piece of text, in a fixed order."""
    findings: list[str] = []
    for kind, pattern in (
        ("override_instructions", _OVERRIDE),
        ("calls_other_tools", _CALLS),
        ("exfiltration", _EXFIL),
    ):
        match = pattern.search(text)
        if match:
            findings.append(f"{kind}: {_excerpt(text, match)!r}")
    hidden = _HIDDEN.findall(text)
    if hidden:
        codes = sorted({f"U+{ord(ch):04X}" for ch in hidden})
        findings.append(f"hidden_unicode: {len(hidden)} invisible character(s) {', '.join(codes)}")
    return findings


def _schema_texts(schema: Mapping[str, Any]) -> Iterable[str]:
    """Every description and title inside a schema (parameter descriptions are shown to the model too)."""
    for key, value in schema.items():
        if key in ("description", "title") and isinstance(value, str):
            yield value
        elif isinstance(value, Mapping):
            yield from _schema_texts(value)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, Mapping):
                    yield from _schema_texts(item)


def scan_tool(description: str, schema: Mapping[str, Any]) -> tuple[str, ...]:
    """Return the findings for a tool's description and the descriptions inside its schema, deduplicated."""
    findings: list[str] = []
    for text in (description, *_schema_texts(schema)):
        for finding in scan_text(text):
            if finding not in findings:
                findings.append(finding)
    return tuple(findings)
