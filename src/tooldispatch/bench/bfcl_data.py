"""BFCL v4 test data, read straight from the ``bfcl-eval`` wheel.

The Berkeley Function Calling Leaderboard (BFCL, Apache-2.0, by the Gorilla authors) ships its questions
in ``bfcl_eval/data/BFCL_v4_<category>.json`` and the accepted answers in
``bfcl_eval/data/possible_answer/BFCL_v4_<category>.json`` (one JSON object per line). We read both from
the wheel with ``zipfile``; the package and its dependencies are never installed.

BFCL describes arguments in a Python flavour of JSON Schema (``"type": "dict"``, ``"float"``, ``"tuple"``,
``"any"``); ``to_json_schema`` maps them to standard JSON Schema so the parser's repair and validation can
use them, while the checker keeps the original types (BFCL's semantics depend on them).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Final

from tooldispatch.errors import ConfigError
from tooldispatch.policy import ToolPolicy
from tooldispatch.toolspec import ToolSpec

BFCL_VERSION = "2026.3.23"
"""The ``bfcl-eval`` release whose data we read."""

WHEEL_NAME = f"bfcl_eval-{BFCL_VERSION}-py3-none-any.whl"

AST_CATEGORIES: tuple[str, ...] = (
    "simple_python",
    "multiple",
    "parallel",
    "parallel_multiple",
    "irrelevance",
    "live_simple",
    "live_multiple",
    "live_parallel",
    "live_parallel_multiple",
    "live_irrelevance",
    "live_relevance",
)
"""Single-turn Python categories that the AST checker scores."""

NO_CALL_CATEGORIES: frozenset[str] = frozenset({"irrelevance", "live_irrelevance"})
"""Categories where the right answer is to call nothing."""

_SAFE_NAME = re.compile(r"[^a-zA-Z0-9_-]")
_TYPE_MAP = {"dict": "object", "float": "number", "tuple": "array", "integer": "integer", "string": "string"}


@dataclass(frozen=True, slots=True)
class BfclCase:
    """One BFCL question with its functions and accepted answers.

    Attributes:
        id: BFCL's id (``simple_python_0``).
        category: the category it came from.
        messages: the chat messages of its (single) turn.
        functions: the function docs as BFCL wrote them (BFCL types).
        ground_truth: one ``{function_name: {argument: [accepted values]}}`` per expected call; empty for
            categories where no call is expected; ``None`` for ``live_relevance`` (any call is right).
    """

    id: str
    category: str
    messages: tuple[Mapping[str, Any], ...]
    functions: tuple[Mapping[str, Any], ...]
    ground_truth: tuple[Mapping[str, Any], ...] | None = field(default=())

    @property
    def expects_no_call(self) -> bool:
        """True when the correct behaviour is to call no function."""
        return self.category in NO_CALL_CATEGORIES

    def tools(self) -> list[ToolSpec]:
        """The functions as tool declarations with standard JSON Schema parameters."""
        return [function_to_tool(f) for f in self.functions]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serializable form (what a replay corpus stores)."""
        return {
            "id": self.id,
            "category": self.category,
            "messages": [dict(m) for m in self.messages],
            "functions": [dict(f) for f in self.functions],
            "ground_truth": None if self.ground_truth is None else [dict(g) for g in self.ground_truth],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BfclCase:
        """Rebuild a case from ``to_dict`` output."""
        gt = data.get("ground_truth")
        return cls(
            id=str(data["id"]),
            category=str(data["category"]),
            messages=tuple(data.get("messages", ())),
            functions=tuple(data.get("functions", ())),
            ground_truth=None if gt is None else tuple(gt),
        )


def to_json_schema(schema: Any) -> Any:
    """Map a BFCL parameter schema to standard JSON Schema.

    ``dict`` → ``object``, ``float`` → ``number``, ``tuple`` → ``array``, ``any`` → no type constraint;
    BFCL's own ``optional`` flag is dropped (``required`` already says it). Everything else is kept.
    """
    if isinstance(schema, list):
        return [to_json_schema(s) for s in schema]
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "optional":
            continue
        if key == "type" and isinstance(value, str):
            if value == "any":
                continue
            out[key] = _TYPE_MAP.get(value, value)
        elif key == "properties" and isinstance(value, Mapping):
            out[key] = {name: to_json_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "anyOf", "oneOf", "allOf"):
            out[key] = to_json_schema(value)
        else:
            out[key] = value
    return out


BFCL_POLICY: Final = ToolPolicy.read_only(
    why="BFCL tools declared read_only (its functions are pure computations): calls recovered from running text"
)
"""What the benchmark declares its tools to be: BFCL's functions compute and change nothing."""


def function_to_tool(function: Mapping[str, Any]) -> ToolSpec:
    """Turn one BFCL function doc into a ``ToolSpec`` with standard JSON Schema."""
    params = to_json_schema(function.get("parameters") or {"type": "dict", "properties": {}})
    if isinstance(params, dict):
        params.setdefault("type", "object")
    return ToolSpec(name=str(function["name"]), description=str(function.get("description", "")), parameters=params)


def data_dir() -> Path:
    """The folder holding the ``bfcl-eval`` wheel (``TOOLDISPATCH_BFCL_DIR`` or ``~/.cache/tooldispatch/bfcl``)."""
    env = os.environ.get("TOOLDISPATCH_BFCL_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "tooldispatch" / "bfcl"


def ensure_wheel(*, download: bool = True) -> Path:
    """Return the path of the ``bfcl-eval`` wheel, downloading it from PyPI (no dependencies) if missing.

    Raises:
        ConfigError: the wheel is missing and could not be downloaded.
    """
    folder = data_dir()
    wheel = folder / WHEEL_NAME
    if wheel.is_file():
        return wheel
    command = [sys.executable, "-m", "pip", "download", "--no-deps", f"bfcl-eval=={BFCL_VERSION}", "-d", str(folder)]
    hint = f"run `{' '.join(command[2:])}` (or set TOOLDISPATCH_BFCL_DIR to a folder holding {WHEEL_NAME})"
    if not download:
        raise ConfigError(f"BFCL data not found at {wheel}; {hint}")
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not wheel.is_file():
        raise ConfigError(f"could not download the BFCL data ({proc.stderr.strip()[-300:]}); {hint}")
    return wheel


@cache
def _read_member(wheel: str, member: str) -> list[dict[str, Any]]:
    with zipfile.ZipFile(wheel) as zf:
        try:
            raw = zf.read(member).decode("utf-8")
        except KeyError:
            return []
    return [json.loads(line) for line in raw.splitlines() if line.strip()]


def available_categories(wheel: Path | None = None) -> list[str]:
    """Every category that has a question file in the wheel."""
    path = wheel or ensure_wheel()
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
    prefix = "bfcl_eval/data/BFCL_v4_"
    return sorted(n[len(prefix) : -len(".json")] for n in names if n.startswith(prefix) and n.endswith(".json"))


def load_category(category: str, *, wheel: Path | None = None) -> list[BfclCase]:
    """Load every case of one category, in BFCL's order.

    Raises:
        ConfigError: the category does not exist, or it is not a single-turn category this harness scores.
    """
    path = wheel or ensure_wheel()
    if category not in AST_CATEGORIES:
        known = ", ".join(AST_CATEGORIES)
        if category in available_categories(path):
            raise ConfigError(f"BFCL category {category!r} is not a single-turn Python category; use one of {known}")
        raise ConfigError(f"unknown BFCL category {category!r}; use one of {known}")
    questions = _read_member(str(path), f"bfcl_eval/data/BFCL_v4_{category}.json")
    answers = {a["id"]: a["ground_truth"] for a in _read_member(str(path), _answer_member(category))}
    cases = []
    for q in questions:
        turns = q["question"]
        messages = tuple(turns[0]) if turns and isinstance(turns[0], list) else tuple(turns)
        if category in NO_CALL_CATEGORIES:
            truth: tuple[Mapping[str, Any], ...] | None = ()
        elif category == "live_relevance":
            truth = None
        else:
            truth = tuple(answers.get(q["id"], ()))
        cases.append(
            BfclCase(
                id=q["id"], category=category, messages=messages, functions=tuple(q["function"]), ground_truth=truth
            )
        )
    return cases


def _answer_member(category: str) -> str:
    return f"bfcl_eval/data/possible_answer/BFCL_v4_{category}.json"


def load_cases(
    categories: Sequence[str], *, limit: int | None = None, wheel: Path | None = None, interleave: bool = True
) -> list[BfclCase]:
    """Load the first ``limit`` cases (all when ``None``) of each category.

    With ``interleave`` the cases alternate between categories (the first of each, then the second of
    each, ...), so a run stopped halfway has covered every category evenly.
    """
    groups = []
    for category in categories:
        cases = load_category(category, wheel=wheel)
        groups.append(cases if limit is None else cases[:limit])
    if not interleave:
        return [case for group in groups for case in group]
    out: list[BfclCase] = []
    for i in range(max((len(g) for g in groups), default=0)):
        out.extend(g[i] for g in groups if i < len(g))
    return out


def safe_tool_names(tools: Sequence[ToolSpec]) -> tuple[list[ToolSpec], dict[str, str]]:
    """Rename tools to API-safe names; return the tools and the map from new name to original name."""
    out: list[ToolSpec] = []
    mapping: dict[str, str] = {}
    for tool in tools:
        safe = _SAFE_NAME.sub("_", tool.name)[:64]
        if safe != tool.name:
            mapping[safe] = tool.name
        out.append(ToolSpec(name=safe, description=tool.description, parameters=tool.parameters))
    return out, mapping
