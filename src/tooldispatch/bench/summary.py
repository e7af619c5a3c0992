"""Per-cell summaries of scored outputs, and differences between quantizations of one model.

The summary is plain JSON-friendly data: reports, charts and tests read the same numbers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tooldispatch.bench.corpus import Cell, OutputRecord
from tooldispatch.bench.scoring import BUCKETS, MODES, ScoredOutput
from tooldispatch.bench.stats import Difference, Rate, paired_difference, pass_hat_k, percentile, rate


@dataclass(frozen=True, slots=True)
class CellSummary:
    """What one matrix cell scored.

    Attributes:
        cell: the cell key.
        label: a short label for charts.
        model: model name.
        quant: quantization label.
        engine: engine and version (``llama.cpp 0.3.36``).
        tensor_types: the model file's real tensor types.
        outputs: number of outputs scored.
        errors: requests that failed for good.
        buckets: rate of each output bucket (all outputs).
        in_reasoning: rate of outputs whose calls came from inside the reasoning.
        accuracy: per mode, BFCL AST accuracy over cases that expect calls.
        false_positive: per mode, share of irrelevance cases with at least one call.
        overall: per mode, accuracy over all cases (irrelevance right = no call), BFCL-style.
        by_category: per category, per mode, accuracy (irrelevance: no call).
        latency_p50_s: median seconds per request.
        latency_p95_s: 95th percentile seconds per request.
        tokens_per_s: median decode tokens per second.
        completion_tokens_mean: mean completion tokens.
        cost_usd: summed cost, when reported.
        providers: how many requests each provider served.
        pass_k: per mode, ``{k: pass^k}`` when several seeds ran.
        seeds: the seeds that ran.
    """

    cell: str
    label: str
    model: str
    quant: str
    engine: str
    tensor_types: Mapping[str, int]
    outputs: int
    errors: int
    buckets: Mapping[str, Rate]
    in_reasoning: Rate
    accuracy: Mapping[str, Rate]
    false_positive: Mapping[str, Rate]
    overall: Mapping[str, Rate]
    by_category: Mapping[str, Mapping[str, Rate]]
    latency_p50_s: float | None
    latency_p95_s: float | None
    tokens_per_s: float | None
    completion_tokens_mean: float | None
    cost_usd: float | None
    providers: Mapping[str, int] = field(default_factory=dict)
    pass_k: Mapping[str, Mapping[int, float]] = field(default_factory=dict)
    seeds: Sequence[int] = ()

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serializable form."""
        return {
            "cell": self.cell,
            "label": self.label,
            "model": self.model,
            "quant": self.quant,
            "engine": self.engine,
            "tensor_types": dict(self.tensor_types),
            "outputs": self.outputs,
            "errors": self.errors,
            "buckets": {b: r.to_dict() for b, r in self.buckets.items()},
            "in_reasoning": self.in_reasoning.to_dict(),
            "accuracy": {m: r.to_dict() for m, r in self.accuracy.items()},
            "false_positive": {m: r.to_dict() for m, r in self.false_positive.items()},
            "overall": {m: r.to_dict() for m, r in self.overall.items()},
            "by_category": {c: {m: r.to_dict() for m, r in v.items()} for c, v in self.by_category.items()},
            "latency_p50_s": self.latency_p50_s,
            "latency_p95_s": self.latency_p95_s,
            "tokens_per_s": self.tokens_per_s,
            "completion_tokens_mean": self.completion_tokens_mean,
            "cost_usd": self.cost_usd,
            "providers": dict(self.providers),
            "pass_k": {m: {str(k): v for k, v in ks.items()} for m, ks in self.pass_k.items()},
            "seeds": list(self.seeds),
        }


def summarize_cell(cell: str, rows: Sequence[tuple[OutputRecord, ScoredOutput]]) -> CellSummary:
    """Aggregate the scored outputs of one cell."""
    records = [r for r, _ in rows]
    scored = [s for _, s in rows]
    first = records[0] if records else None
    call_cases = [s for s in scored if not s.expects_no_call]
    no_call_cases = [s for s in scored if s.expects_no_call]
    by_category: dict[str, dict[str, Rate]] = {}
    for category in sorted({s.category for s in scored}):
        in_cat = [s for s in scored if s.category == category]
        by_category[category] = {m: rate([s.correct[m] for s in in_cat]) for m in MODES}
    ok = [r for r in records if r.error is None]
    latencies = [r.latency_s for r in ok]
    speeds = [v for r in ok if (v := r.decode_tokens_per_s) is not None]
    costs = [r.cost for r in ok if r.cost is not None]
    providers: dict[str, int] = defaultdict(int)
    for r in ok:
        if r.provider:
            providers[r.provider] += 1
    seeds = sorted({s.seed for s in scored})
    pass_k: dict[str, dict[int, float]] = {}
    if len(seeds) > 1:
        for mode in MODES:
            runs: dict[str, list[bool]] = defaultdict(list)
            for s in scored:
                runs[s.case_id].append(s.correct[mode])
            pass_k[mode] = {k: pass_hat_k(runs, k) for k in range(1, len(seeds) + 1)}
    parsed = Cell.from_key(cell)
    engine = f"{first.engine} {first.engine_version}".strip() if first else ""
    return CellSummary(
        cell=cell,
        label=parsed.label,
        model=parsed.model,
        quant=parsed.quant,
        engine=engine,
        tensor_types=dict(first.tensor_types) if first else {},
        outputs=len(scored),
        errors=sum(1 for r in records if r.error is not None),
        buckets={b: rate([s.bucket == b for s in scored]) for b in BUCKETS},
        in_reasoning=rate([s.in_reasoning for s in scored]),
        accuracy={m: rate([s.correct[m] for s in call_cases]) for m in MODES},
        false_positive={m: rate([s.n_calls[m] > 0 for s in no_call_cases]) for m in MODES},
        overall={m: rate([s.correct[m] for s in scored]) for m in MODES},
        by_category=by_category,
        latency_p50_s=percentile(latencies, 50),
        latency_p95_s=percentile(latencies, 95),
        tokens_per_s=percentile(speeds, 50),
        completion_tokens_mean=(sum(r.completion_tokens for r in ok) / len(ok)) if ok else None,
        cost_usd=sum(costs) if costs else None,
        providers=dict(providers),
        pass_k=pass_k,
        seeds=seeds,
    )


@dataclass(frozen=True, slots=True)
class QuantDifference:
    """Accuracy of one cell minus another's, for one model, per mode, paired by case and seed: two quantizations,
    or one file decoded with and without a grammar.

    Attributes:
        model: the model.
        a: the cell key compared.
        b: the cell key of the reference (the model's first quantization, or the unconstrained cell).
        accuracy: per mode, the paired difference in AST accuracy (cases that expect calls).
        false_positive: per mode, the paired difference in false-positive rate.
    """

    model: str
    a: str
    b: str
    accuracy: Mapping[str, Difference]
    false_positive: Mapping[str, Difference]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serializable form."""
        return {
            "model": self.model,
            "a": self.a,
            "b": self.b,
            "accuracy": {m: d.to_dict() for m, d in self.accuracy.items()},
            "false_positive": {m: d.to_dict() for m, d in self.false_positive.items()},
        }


def quant_differences(by_cell: Mapping[str, Sequence[ScoredOutput]]) -> list[QuantDifference]:
    """Paired differences: every quantization of a model against that model's first (reference) cell, and every
    constrained cell against the same file decoded freely.

    Quantizations are compared within one backend, parse mode and decoding mode; a constrained cell is compared
    with the unconstrained cell of the same backend, model, quantization and parse mode, when the run has one.
    """
    groups: dict[tuple[str, str, str, str], list[str]] = defaultdict(list)
    for key in by_cell:
        c = Cell.from_key(key)
        groups[(c.backend, c.model, c.parse_mode, c.mode)].append(key)
    pairs = [(keys[0], other) for keys in groups.values() for other in keys[1:]]
    for key in by_cell:
        c = Cell.from_key(key)
        free = replace(c, constrained=False, tool_choice="auto").key
        if c.constrained and free in by_cell:
            pairs.append((free, key))
    return [_difference(by_cell, reference, other) for reference, other in pairs]


def _difference(by_cell: Mapping[str, Sequence[ScoredOutput]], reference: str, other: str) -> QuantDifference:
    acc: dict[str, Difference] = {}
    fp: dict[str, Difference] = {}
    for mode in MODES:
        a_acc = _outcomes(by_cell[other], mode, no_call=False)
        b_acc = _outcomes(by_cell[reference], mode, no_call=False)
        acc[mode] = paired_difference(a_acc, b_acc)
        a_fp = _outcomes(by_cell[other], mode, no_call=True)
        b_fp = _outcomes(by_cell[reference], mode, no_call=True)
        fp[mode] = paired_difference(a_fp, b_fp)
    model = Cell.from_key(other).model
    return QuantDifference(model=model, a=other, b=reference, accuracy=acc, false_positive=fp)


def _outcomes(scored: Iterable[ScoredOutput], mode: str, *, no_call: bool) -> dict[tuple[str, int], bool]:
    if no_call:
        return {(s.case_id, s.seed): s.n_calls[mode] > 0 for s in scored if s.expects_no_call}
    return {(s.case_id, s.seed): s.correct[mode] for s in scored if not s.expects_no_call}
