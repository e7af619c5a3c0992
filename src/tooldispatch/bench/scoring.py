"""Scoring one raw output five ways, and a cell of outputs into rates.

For every output the same raw text (with the reasoning the engine split off, handed over as ``reasoning=``) is
turned into calls by:

- ``strict``: tooldispatch's strict stage only (documented formats, native calls), no repair;
- ``fallback``: strict plus the tolerant fallback, no repair;
- ``repair``: the full cascade (strict → fallback → bounded schema-guided repair);
- ``baseline``: what a serving stack does by default: the family's documented format only, and on any
  failure the whole output becomes text (no calls);
- ``json_repair``: the ``json_repair`` library on the raw text, taking ``{"name", "arguments"}`` objects.

Each list of calls is scored with the BFCL AST checker. Scoring is pure: the parser is passed in, so
replaying a corpus with another parser version is one argument.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tooldispatch.bench import bfcl_checker
from tooldispatch.bench.bfcl_data import BFCL_POLICY, BfclCase, safe_tool_names
from tooldispatch.bench.corpus import OutputRecord
from tooldispatch.policy import ToolPolicy
from tooldispatch.types import FLAG_IN_REASONING, ParseOutcome

MODES: tuple[str, ...] = ("strict", "fallback", "repair", "baseline", "json_repair")
"""The five ways an output is turned into calls."""

BUCKETS: tuple[str, ...] = (
    "ok_strict",
    "ok_fallback",
    "repaired",
    "InvalidJson",
    "UnknownName",
    "SchemaMismatch",
    "Truncated",
    "Ambiguous",
    "no_call",
    "error",
)
"""Per-output buckets, in report order: every bucket of ``tooldispatch.types.Bucket``, then ``no_call`` and
``error`` (the request failed and there is no output)."""

_ACCEPTED_ORDER = {"ok_strict": 0, "ok_fallback": 1, "repaired": 2}

ParseFn = Callable[..., ParseOutcome]
"""``parse_tool_calls``-compatible: ``(text, tools, *, reasoning, native_calls, finish_reason, tool_format,
repair)``."""

Call = tuple[str, Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class ScoredOutput:
    """One output, scored.

    Attributes:
        case_id: the case.
        category: its BFCL category (or ``suite``).
        seed: sampling seed.
        bucket: the output's bucket: the deepest accepted bucket among its calls, else the first rejected
            candidate's bucket, else ``no_call`` (``error`` when the request failed).
        in_reasoning: a call was recovered from inside the reasoning.
        candidate_buckets: how many candidates landed in each bucket.
        correct: per mode, whether the BFCL checker accepted the calls.
        n_calls: per mode, how many calls were produced.
        reasons: per mode, the checker's reason when wrong.
        expects_no_call: the case is an irrelevance case.
    """

    case_id: str
    category: str
    seed: int
    bucket: str
    in_reasoning: bool
    candidate_buckets: Mapping[str, int]
    correct: Mapping[str, bool]
    n_calls: Mapping[str, int]
    reasons: Mapping[str, str | None] = field(default_factory=dict)
    expects_no_call: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serializable form."""
        return {
            "case_id": self.case_id,
            "category": self.category,
            "seed": self.seed,
            "bucket": self.bucket,
            "in_reasoning": self.in_reasoning,
            "candidate_buckets": dict(self.candidate_buckets),
            "correct": dict(self.correct),
            "n_calls": dict(self.n_calls),
            "reasons": dict(self.reasons),
        }


def default_parser() -> ParseFn:
    """The project's parser (imported on first use)."""
    from tooldispatch.parsing.core import parse_tool_calls

    return parse_tool_calls


def score_output(
    record: OutputRecord, *, parse: ParseFn | None = None, policy: ToolPolicy = BFCL_POLICY
) -> ScoredOutput:
    """Score one BFCL output five ways (see the module docstring), the case's tools declared by ``policy``.

    The default declares every BFCL function read-only (they are pure computations); a policy with no rules
    scores the same outputs as a client that declares nothing would see them.
    """
    case = BfclCase.from_dict(record.case)
    if record.error is not None:
        return ScoredOutput(
            case_id=record.case_id,
            category=case.category,
            seed=record.seed,
            bucket="error",
            in_reasoning=False,
            candidate_buckets={},
            correct={m: False for m in MODES},
            n_calls={m: 0 for m in MODES},
            reasons={m: "error" for m in MODES},
            expects_no_call=case.expects_no_call,
        )
    fn = parse or default_parser()
    specs = case.tools()
    name_map: dict[str, str] = dict(record.extra.get("name_map") or {})
    if name_map:
        specs, _ = safe_tool_names(specs)
    tools = policy.declare(specs)
    natives = [dict(c) for c in record.native_calls] or None
    # The reasoning the engine split off is handed over apart, as the agent and the proxy hand it over.
    common: dict[str, Any] = {
        "reasoning": record.reasoning,
        "native_calls": natives,
        "finish_reason": record.finish_reason,
    }
    bare = fn(record.text, tools, repair="none", **common)
    full = fn(record.text, tools, repair=None, **common)  # each tool's own level, as the policy declares it
    calls: dict[str, list[Call]] = {
        "strict": [(c.name, c.arguments) for c in bare.calls if c.stage in ("native", "strict")],
        "fallback": [(c.name, c.arguments) for c in bare.calls],
        "repair": [(c.name, c.arguments) for c in full.calls],
        "baseline": baseline_calls(record),
        "json_repair": json_repair_calls(record.text),
    }
    correct: dict[str, bool] = {}
    reasons: dict[str, str | None] = {}
    for mode, mode_calls in calls.items():
        verdict = bfcl_checker.check(case, mode_calls, name_map=name_map)
        correct[mode] = verdict.valid
        reasons[mode] = verdict.reason
    counts: dict[str, int] = {}
    for cand in full.candidates:
        counts[cand.bucket] = counts.get(cand.bucket, 0) + 1
    return ScoredOutput(
        case_id=record.case_id,
        category=case.category,
        seed=record.seed,
        bucket=output_bucket(full),
        in_reasoning=FLAG_IN_REASONING in full.flags or any(FLAG_IN_REASONING in c.flags for c in full.calls),
        candidate_buckets=counts,
        correct=correct,
        n_calls={mode: len(c) for mode, c in calls.items()},
        reasons=reasons,
        expects_no_call=case.expects_no_call,
    )


def output_bucket(outcome: ParseOutcome) -> str:
    """The bucket of a whole output (see ``ScoredOutput.bucket``)."""
    if outcome.calls:
        return max((c.bucket for c in outcome.calls), key=lambda b: _ACCEPTED_ORDER.get(b, 0))
    rejected = outcome.rejected
    if rejected:
        return rejected[0].bucket
    return "no_call"


def baseline_calls(record: OutputRecord) -> list[Call]:
    """What a serving stack returns by default: the documented format only, all-or-nothing.

    Native calls are decoded with ``json.loads``; one failure turns the whole answer into text. In prompt
    mode the family's format is read the way serving stacks read it, without tooldispatch's fallback,
    repair or false-positive guard: ``<tool_call>`` blocks with vLLM's hermes pattern and ``json.loads``
    (an object or a list of objects per block), other formats with their strict finder. A block that does
    not decode means no calls at all.
    """
    if record.native_calls:
        out: list[Call] = []
        for native in record.native_calls:
            args = _json_object(str(native.get("arguments") or "{}"))
            if args is None:
                return []
            out.append((str(native.get("name", "")), args))
        return out
    fmt = parser_format(str(record.extra.get("tool_format") or ""))
    if fmt == "hermes":
        return _hermes_baseline(record.text)
    from tooldispatch.parsing.formats import FORMATS

    finder = FORMATS.get(fmt)
    if finder is None:
        return []
    raws = finder.find(record.text)
    if any(r.decode_error or r.lenient or r.truncated or not isinstance(r.arguments, dict) for r in raws):
        return []
    return [(str(r.name), r.arguments) for r in raws if isinstance(r.arguments, dict)]


_HERMES = re.compile(r"<tool_call>(.*?)</tool_call>|<tool_call>(.*)", re.DOTALL)


def _hermes_baseline(text: str) -> list[Call]:
    out: list[Call] = []
    for match in _HERMES.finditer(text):
        body = (match.group(1) if match.group(1) is not None else match.group(2)).strip()
        try:
            decoded = json.loads(body)
        except json.JSONDecodeError:
            return []
        items = decoded if isinstance(decoded, list) else [decoded]
        for item in items:
            if not isinstance(item, dict) or not isinstance(item.get("name"), str):
                return []
            raw_args = item.get("arguments", item.get("parameters", {}))
            args = _json_object(raw_args) if isinstance(raw_args, str) else raw_args
            if not isinstance(args, dict):
                return []
            out.append((item["name"], args))
    return out


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def parser_format(prompt_format: str) -> str:
    """The parser's strict format for a family's prompt format (``auto`` when unknown or not given)."""
    from tooldispatch.prompting.formats import FORMATS

    fmt = FORMATS.get(prompt_format)
    return fmt.parser_format if fmt is not None else "auto"


def json_repair_calls(text: str) -> list[Call]:
    """Calls that the ``json_repair`` library recovers from the raw text (``name`` + ``arguments``/``parameters``)."""
    import json_repair

    try:
        decoded = json_repair.loads(text)
    except Exception:  # json_repair raises assorted errors on hostile input; none is a call
        return []
    out: list[Call] = []
    _collect_calls(decoded, out, depth=0)
    return out


def _collect_calls(value: Any, out: list[Call], *, depth: int) -> None:
    if depth > 4:
        return
    if isinstance(value, list):
        for item in value:
            _collect_calls(item, out, depth=depth + 1)
        return
    if not isinstance(value, dict):
        return
    if isinstance(value.get("function"), dict):
        _collect_calls(value["function"], out, depth=depth + 1)
        return
    if isinstance(value.get("tool_calls"), list):
        _collect_calls(value["tool_calls"], out, depth=depth + 1)
        return
    name = value.get("name")
    args = value.get("arguments", value.get("parameters"))
    if isinstance(args, str):
        import json_repair

        try:
            args = json_repair.loads(args)
        except Exception:  # same as above
            args = None
    if isinstance(name, str) and isinstance(args, dict):
        out.append((name, args))
