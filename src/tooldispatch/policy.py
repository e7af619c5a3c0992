"""Tool policy files: what tools declared without metadata are, by name glob.

A tool declared as a plain OpenAI dict (a proxy request's ``tools``, ``parse --tools FILE``, a library
caller's list) says nothing about side effects, so the parser treats it as side-effecting: only calls in a
delimited form, lossless repairs only. A policy file declares what such tools are::

    # The first rule whose glob matches a tool's name decides; a tool no rule matches stays side-effecting.
    [tools."get_*"]
    read_only = true
    idempotent = true

    [tools."delete_*"]
    destructive = true

    [tools."job_status"]
    read_only = true
    polling = true

Globs are ``fnmatch`` patterns matched case-sensitively against the whole name (``*``, ``?``, ``[abc]``).
``read_only = true`` gives the tool the ``bounded`` repair level (near-match repairs, and a call recovered
from running text when the text earns it); anything else gives ``lossless``. ``destructive`` and
``idempotent`` are checked and kept (a destructive tool cannot be read-only; a read-only one is idempotent) and
change no parse: a side-effecting tool is already parsed as conservatively as the parser can. ``polling = true``
says that identical calls may return new results (a job's status): the proxy's repeat guard never holds them.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooldispatch.errors import ConfigError
from tooldispatch.toolspec import ToolSpec
from tooldispatch.types import RepairLevel

__all__ = ["ToolPolicy", "ToolRule", "load_policy"]

_KEYS = ("read_only", "destructive", "idempotent", "polling")


@dataclass(frozen=True, slots=True)
class ToolRule:
    """What the tools a glob matches are.

    Attributes:
        glob: an ``fnmatch`` pattern matched against the whole tool name.
        read_only: the tool changes nothing (its calls may be recovered from running text and repaired to a
            near name).
        destructive: the tool's effects cannot be undone.
        idempotent: calling it twice with the same arguments does what calling it once does.
        polling: identical calls may return new results (a status check); the repeat guard never holds them.
    """

    glob: str
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    polling: bool = False

    def matches(self, name: str) -> bool:
        """Whether the glob matches the whole of ``name`` (case-sensitively)."""
        return fnmatch.fnmatchcase(name, self.glob)


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """Rules in order; the first rule that matches a tool's name decides what the tool is.

    Attributes:
        rules: the rules, in the file's order.
        source: where the rules came from (a file path, or a short description), shown in reports.
    """

    rules: tuple[ToolRule, ...] = ()
    source: str = "no policy: every tool undeclared (side-effecting)"

    def rule_for(self, name: str) -> ToolRule | None:
        """The first rule whose glob matches ``name``, or ``None``."""
        for rule in self.rules:
            if rule.matches(name):
                return rule
        return None

    def declare(self, specs: Iterable[ToolSpec]) -> tuple[ToolSpec, ...]:
        """The specs with each matched tool's repair level set from its rule (unmatched specs as given)."""
        out: list[ToolSpec] = []
        for spec in specs:
            rule = self.rule_for(spec.name)
            if rule is not None:
                level: RepairLevel = "bounded" if rule.read_only else "lossless"
                if spec.repair != level:
                    spec = dataclasses.replace(spec, repair=level)
            out.append(spec)
        return tuple(out)

    def polls(self, name: str) -> bool:
        """Whether the rule for ``name`` declares it a polling tool."""
        rule = self.rule_for(name)
        return rule is not None and rule.polling

    @classmethod
    def read_only(cls, glob: str = "*", *, why: str) -> ToolPolicy:
        """A policy declaring every tool ``glob`` matches read-only and idempotent, saying ``why`` in reports."""
        return cls((ToolRule(glob, read_only=True, idempotent=True),), source=why)


def load_policy(path: Path) -> ToolPolicy:
    """Read and check a policy file.

    Raises:
        ConfigError: the file is missing, is not TOML, or a rule is malformed; the message names the rule and
            the fix.
    """
    where = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"policy file {where!r} does not exist; pass --policy with a TOML file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read policy file {where!r}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"policy file {where!r} is not valid TOML: {exc}") from exc
    return policy_from_dict(data, source=where)


def policy_from_dict(data: Mapping[str, Any], *, source: str) -> ToolPolicy:
    """Check the decoded TOML of a policy file and build the policy (see :func:`load_policy`)."""
    extra = sorted(k for k in data if k != "tools")
    if extra:
        raise ConfigError(
            f"policy file {source!r}: unknown top-level key(s) {', '.join(map(repr, extra))}; a policy holds only "
            '[tools."GLOB"] tables'
        )
    tools = data.get("tools", {})
    if not isinstance(tools, Mapping):
        raise ConfigError(f"policy file {source!r}: 'tools' must be a table of [tools.\"GLOB\"] tables")
    rules: list[ToolRule] = []
    for glob, body in tools.items():
        rule = f'[tools."{glob}"]'
        if not glob.strip():
            raise ConfigError(f'policy file {source!r}: a rule has an empty glob; name tools like "get_*"')
        if not isinstance(body, Mapping):
            raise ConfigError(
                f"policy file {source!r}: {rule} must be a table (read_only, destructive, idempotent, polling), "
                f"not {type(body).__name__}"
            )
        unknown = sorted(k for k in body if k not in _KEYS)
        if unknown:
            raise ConfigError(
                f"policy file {source!r}: {rule} has unknown key(s) {', '.join(map(repr, unknown))}; "
                f"use {', '.join(_KEYS)}"
            )
        flags: dict[str, bool] = {}
        for key in _KEYS:
            value = body.get(key, False)
            if not isinstance(value, bool):
                raise ConfigError(f"policy file {source!r}: {rule} {key} must be true or false, not {value!r}")
            flags[key] = value
        if flags["read_only"] and flags["destructive"]:
            raise ConfigError(
                f"policy file {source!r}: {rule} says both read_only and destructive; a tool that changes nothing "
                "destroys nothing, so keep one"
            )
        if re.search(r"\[[^\]]*$", glob):
            raise ConfigError(f"policy file {source!r}: {rule} has a '[' with no closing ']' in its glob")
        idempotent = flags["idempotent"] or flags["read_only"]
        rules.append(
            ToolRule(
                glob,
                read_only=flags["read_only"],
                destructive=flags["destructive"],
                idempotent=idempotent,
                polling=flags["polling"],
            )
        )
    return ToolPolicy(tuple(rules), source=source)
