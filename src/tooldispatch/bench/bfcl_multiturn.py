"""BFCL multi-turn data, environments and checker, used from the ``bfcl-eval`` wheel as BFCL ships them.

The multi-turn categories (``multi_turn_base``, ``multi_turn_miss_param``, ``multi_turn_miss_func``,
``multi_turn_long_context``) come with executable environments (a file system, a trading bot, a travel
system, ... in ``bfcl_eval/eval_checker/multi_turn_eval/func_source_code/``) and the official checker
(``multi_turn_checker.py``: after every turn the model's state must equal the ground truth's, and the ground
truth's execution results must appear among the model's). Nothing of that is rewritten here: the wheel is put
on ``sys.path`` (Python imports a pure wheel as a zip) and its modules are imported. The environments need
``mpmath`` (the math API) besides the standard library; no other dependency of the wheel is imported.

What is written here, and why:

- the function docs are gathered per case as BFCL's ``populate_test_cases_with_predefined_functions`` does
  (``bfcl_eval/utils.py`` imports ``filelock`` and the whole constants package, model handlers included);
- the ground truth's Python call strings are read with ``ast`` into (name, arguments) for the scripted
  replay (BFCL ``eval``s them; model output never goes through ``eval`` here);
- the turn-count check of ``eval_runner._evaluate_single_multi_turn_entry`` (a run that stopped before the
  last turn fails as ``multi_turn:force_terminated``), because ``eval_runner`` imports every model handler.

BFCL's checker executes the calls it scores as Python call strings. The strings it gets from this harness are
written by ``render_call`` from calls the dispatcher already validated against the function's schema and ran
(a registered name and JSON values), never from the model's text.
"""

from __future__ import annotations

import ast
import copy
import importlib
import inspect
import json
import math
import re
import sys
import uuid
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

from tooldispatch.bench.bfcl_data import ensure_wheel
from tooldispatch.errors import ConfigError

MULTI_TURN_CATEGORIES: tuple[str, ...] = (
    "multi_turn_base",
    "multi_turn_miss_param",
    "multi_turn_miss_func",
    "multi_turn_long_context",
)
"""The multi-turn categories BFCL scores with its state checker."""

_CHECKER = "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker"
_UTILS = "bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils"
_BACKENDS = "bfcl_eval.constants.executable_backend_config"
_PROMPTS = "bfcl_eval.constants.default_prompts"
_DOCS = "bfcl_eval/data/multi_turn_func_doc/"


@dataclass(frozen=True, slots=True)
class MultiTurnCase:
    """One BFCL multi-turn conversation.

    Attributes:
        id: BFCL's id (``multi_turn_base_0``).
        category: the category it came from.
        turns: the user's message of each turn; ``None`` for a ``miss_func`` turn that adds functions instead
            (BFCL then sends its own message, ``added_functions_message``).
        initial_config: each environment class's starting state.
        involved_classes: the environment classes the case uses.
        functions: the function docs offered from the first turn (BFCL types).
        held_out: turn index → the function docs added at that turn (``miss_func``).
        ground_truth: the ground-truth calls of each turn, as BFCL's Python call strings.
    """

    id: str
    category: str
    turns: tuple[str | None, ...]
    initial_config: Mapping[str, Any]
    involved_classes: tuple[str, ...]
    functions: tuple[Mapping[str, Any], ...]
    held_out: Mapping[int, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)
    ground_truth: tuple[tuple[str, ...], ...] = ()

    @property
    def long_context(self) -> bool:
        """Whether BFCL loads the environments with their long-context padding."""
        return "long_context" in self.category


def _bfcl_module(wheel: Path, name: str) -> ModuleType:
    """Import one of the wheel's modules (the wheel goes on ``sys.path`` once, as a zip import)."""
    entry = str(wheel)
    if entry not in sys.path:
        sys.path.append(entry)
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(
            f"could not import {name} from {wheel.name} ({exc}); install the bench extra "
            "(`pip install 'tooldispatch[bench]'`), which holds what BFCL's environments import"
        ) from exc


@cache
def _lines(wheel: str, member: str) -> tuple[dict[str, Any], ...]:
    """A JSON-lines member of the wheel (cached: the wheel's files never change under one path)."""
    with zipfile.ZipFile(wheel) as zf:
        raw = zf.read(member).decode("utf-8")
    return tuple(json.loads(line) for line in raw.splitlines() if line.strip())


def added_functions_message(wheel: Path | None = None) -> str:
    """The user message BFCL sends at a ``miss_func`` turn that adds functions."""
    return str(_bfcl_module(wheel or ensure_wheel(), _PROMPTS).DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC)


def max_steps(wheel: Path | None = None) -> int:
    """BFCL's step limit: a turn whose model made calls in more steps than this is force-quit (the case fails)."""
    return int(_bfcl_module(wheel or ensure_wheel(), _PROMPTS).MAXIMUM_STEP_LIMIT)


def load_multi_turn(category: str, *, wheel: Path | None = None) -> list[MultiTurnCase]:
    """Load every case of one multi-turn category, in BFCL's order.

    Raises:
        ConfigError: the category is not a multi-turn category.
    """
    if category not in MULTI_TURN_CATEGORIES:
        raise ConfigError(
            f"{category!r} is not a BFCL multi-turn category; use one of {', '.join(MULTI_TURN_CATEGORIES)}"
        )
    path = str(wheel or ensure_wheel())
    doc_files = _bfcl_module(Path(path), _BACKENDS).MULTI_TURN_FUNC_DOC_FILE_MAPPING
    answers = {
        a["id"]: a["ground_truth"] for a in _lines(path, f"bfcl_eval/data/possible_answer/BFCL_v4_{category}.json")
    }
    cases = []
    for entry in _lines(path, f"bfcl_eval/data/BFCL_v4_{category}.json"):
        functions = [doc for cls in entry["involved_classes"] for doc in _lines(path, _DOCS + doc_files[cls])]
        held_out: dict[int, tuple[Mapping[str, Any], ...]] = {}
        for turn, names in (entry.get("missed_function") or {}).items():
            held_out[int(turn)] = tuple(f for f in functions if f["name"] in names)
            functions = [f for f in functions if f["name"] not in names]
        turns = tuple(_user_text(entry["id"], i, messages) for i, messages in enumerate(entry["question"]))
        cases.append(
            MultiTurnCase(
                id=entry["id"],
                category=category,
                turns=turns,
                initial_config=entry.get("initial_config") or {},
                involved_classes=tuple(entry["involved_classes"]),
                functions=tuple(functions),
                held_out=held_out,
                ground_truth=tuple(tuple(turn) for turn in answers.get(entry["id"], ())),
            )
        )
    return cases


def _user_text(case_id: str, index: int, messages: Sequence[Mapping[str, Any]]) -> str | None:
    if not messages:
        return None
    if len(messages) != 1 or messages[0].get("role") != "user":
        raise ConfigError(f"{case_id} turn {index}: expected one user message, got {len(messages)} messages")
    return str(messages[0]["content"])


def load_multi_turn_cases(
    categories: Sequence[str], *, limit: int | None = None, wheel: Path | None = None
) -> list[MultiTurnCase]:
    """The first ``limit`` cases (all when ``None``) of each category, alternating between categories."""
    groups = [load_multi_turn(c, wheel=wheel)[:limit] for c in categories]
    return [g[i] for i in range(max((len(g) for g in groups), default=0)) for g in groups if i < len(g)]


def new_environment(case: MultiTurnCase, *, wheel: Path | None = None) -> dict[str, Any]:
    """Fresh instances of the case's environment classes, loaded from its ``initial_config`` by BFCL's own code.

    BFCL's ``execute_multi_turn_func_call`` (with no calls) builds them as its inference does; the module-level
    slots it keeps them in are emptied at once, so every call here starts from the initial state.
    """
    path = wheel or ensure_wheel()
    utils = _bfcl_module(path, _UTILS)
    label = f"tooldispatch_env_{uuid.uuid4().hex}"
    try:
        _, instances = utils.execute_multi_turn_func_call(
            [], dict(case.initial_config), list(case.involved_classes), label, case.id, long_context=case.long_context
        )
    finally:
        _forget(utils, label)
    return dict(instances)


def _forget(utils: ModuleType, label: str) -> None:
    for name in [n for n in vars(utils) if n.startswith(label)]:
        delattr(utils, name)


def environment_methods(instances: Mapping[str, Any]) -> dict[str, Any]:
    """The public methods of the environment instances by name, as BFCL maps call names to instances.

    Raises:
        ConfigError: two classes of one case define the same method name (BFCL's name mapping would be ambiguous).
    """
    methods: dict[str, Any] = {}
    for cls, instance in instances.items():
        for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
            if name.startswith("_"):
                continue
            if name in methods:
                raise ConfigError(f"method {name!r} is defined by two environment classes, {cls} among them")
            methods[name] = method
    return methods


def parse_call(text: str, method: Any | None = None) -> tuple[str, dict[str, Any]]:
    """Read one ground-truth call string (``cd(folder='docs')``) into its name and keyword arguments.

    Only literals are read (``ast.literal_eval``); positional arguments are named by ``method``'s signature.

    Raises:
        ConfigError: the text is not one call of a plain name with literal arguments.
    """
    try:
        node = ast.parse(text.strip(), mode="eval").body
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            raise ValueError("not a call of a plain name")
        args = [ast.literal_eval(a) for a in node.args]
        kwargs = {str(k.arg): ast.literal_eval(k.value) for k in node.keywords if k.arg is not None}
    except (SyntaxError, ValueError) as exc:
        raise ConfigError(f"cannot read the ground-truth call {text!r}: {exc}") from exc
    if args:
        if method is None:
            raise ConfigError(f"{text!r} has positional arguments; pass the method to name them")
        kwargs = dict(inspect.signature(method).bind(*args, **kwargs).arguments)
    return node.func.id, kwargs


def render_call(name: str, arguments: Mapping[str, Any]) -> str:
    """The Python call string BFCL's checker executes for a call the dispatcher ran.

    ``arguments`` are JSON values (validated against the tool's schema); each is written with ``repr``, which
    for strings, numbers, booleans, ``None``, lists and dicts is a literal. Non-finite floats, which have no
    literal, are written ``float('nan')``, ``float('inf')``, ``float('-inf')``.
    """
    return f"{name}({', '.join(f'{key}={_literal(value)}' for key, value in arguments.items())})"


def _literal(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return f"float({str(value)!r})"
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    if value is None or isinstance(value, (str, int, float, bool)):
        return repr(value)
    raise ConfigError(f"{type(value).__name__} is not a JSON value; only JSON arguments can be scored")


_SAFE_LABEL = re.compile(r"[^a-zA-Z0-9_]")


def check(case: MultiTurnCase, executed: Sequence[Sequence[str]], *, wheel: Path | None = None) -> dict[str, Any]:
    """Score the calls the runtime executed, turn by turn, with BFCL's ``multi_turn_checker``.

    Args:
        case: the case.
        executed: for each turn that ran, the call strings (``render_call``) the environment executed, in order.
        wheel: the ``bfcl-eval`` wheel (found or downloaded when ``None``).

    Returns:
        BFCL's verdict: ``{"valid": True}``, or ``valid`` false with ``error_type`` and ``error_message``.
    """
    if len(executed) != len(case.ground_truth):
        return {
            "valid": False,
            "error_type": "multi_turn:force_terminated",
            "error_message": f"the run stopped after {len(executed)} of {len(case.ground_truth)} turns",
        }
    path = wheel or ensure_wheel()
    checker = _bfcl_module(path, _CHECKER)
    utils = _bfcl_module(path, _UTILS)
    label = _SAFE_LABEL.sub("_", f"tooldispatch_check_{uuid.uuid4().hex}")
    entry = {
        "id": case.id,
        "initial_config": copy.deepcopy(dict(case.initial_config)),
        "involved_classes": list(case.involved_classes),
    }
    decoded = [[list(calls)] if calls else [] for calls in executed]
    truth = [list(turn) for turn in case.ground_truth]
    try:
        verdict = checker.multi_turn_checker(decoded, truth, entry, case.category, label)
    finally:
        _forget(utils, label)
    return _plain(verdict)


_DETAIL_CHARS = 4000


def _plain(verdict: Mapping[str, Any]) -> dict[str, Any]:
    """The verdict as JSON data: BFCL's details hold whole environment states (sets, objects, the long-context
    padding), so they are kept as text of at most ``_DETAIL_CHARS`` characters."""
    out = {k: v for k, v in verdict.items() if k in ("valid", "error_type", "error_message")}
    rest = {k: v for k, v in verdict.items() if k not in out}
    if rest:
        out["details"] = json.dumps(rest, default=str)[:_DETAIL_CHARS]
    plain: dict[str, Any] = json.loads(json.dumps(out, default=str))
    return plain
