"""Every proxied request counted: its parse outcome, per model and quantization, in the store.

One row per request in ``proxy_requests`` (buckets of every candidate, repairs by kind, formats, stage,
latency, HTTP status); with ``--record``, the request body, the upstream's raw output and the answer in
``proxy_records`` (never a header, so never a key). Rows are written off the event loop in batches by
``Recorder``, so counting adds no store round trip to a request. ``rates`` reads them back per model and
quantization for ``tooldispatch proxy stats`` and the report.

The tables come from the store's named migration ``proxy_0001_requests`` (``store/migrations.py``), written
in portable SQL (TEXT, INTEGER, REAL) so the same migration runs on every store implementation.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, get_args

from tooldispatch.store import StateStore
from tooldispatch.types import Bucket, ParseOutcome

BUCKETS: Final = get_args(Bucket)
# The table's columns for BUCKETS, in the same order (migrations proxy_0001_requests and proxy_0002_ambiguous).
_COLUMNS: Final = (
    "ok_strict",
    "ok_fallback",
    "repaired",
    "invalid_json",
    "unknown_name",
    "schema_mismatch",
    "truncated",
    "ambiguous",
)


@dataclass(slots=True)
class RequestStats:
    """What one request did, as counted.

    Attributes mirror the columns of ``proxy_requests``; ``record`` holds the bodies kept with ``--record``,
    ``budget`` the completion budget when it was clamped to the room left in the context window.
    """

    id: str
    model: str
    quant: str
    engine: str
    mode: str
    stream: bool
    tools: int
    tool_choice: str
    status: int = 200
    error: str | None = None
    calls: int = 0
    stage: str = "none"
    formats: str = ""
    buckets: Mapping[str, int] = field(default_factory=dict)
    repairs: Mapping[str, int] = field(default_factory=dict)
    flags: str = ""
    finish_reason: str | None = None
    latency_s: float = 0.0
    first_token_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    created_at: float = field(default_factory=time.time)
    record: tuple[str, str, str] | None = None
    budget: int | None = None

    def count(self, outcome: ParseOutcome, answered: int) -> None:
        """Take the parse outcome's buckets, repairs, formats, stage and flags; ``answered`` calls went out."""
        buckets: dict[str, int] = {}
        repairs: dict[str, int] = {}
        formats: set[str] = set()
        for candidate in outcome.candidates:  # one loop and plain dicts: a Counter costs several times as much
            buckets[candidate.bucket] = buckets.get(candidate.bucket, 0) + 1
            for repair in candidate.repairs:
                repairs[repair.kind] = repairs.get(repair.kind, 0) + 1
            if candidate.format:
                formats.add(candidate.format)
        self.calls = answered
        self.stage = outcome.stage
        self.buckets, self.repairs = buckets, repairs
        self.formats = ",".join(sorted(formats))
        self.flags = ",".join(sorted(outcome.flags))

    def row(self) -> tuple[Any, ...]:
        """The values of one ``proxy_requests`` row, in column order."""
        return (
            self.id,
            self.created_at,
            self.model,
            self.quant,
            self.engine,
            self.mode,
            int(self.stream),
            self.tools,
            self.tool_choice,
            self.status,
            self.error,
            self.calls,
            self.stage,
            self.formats,
            *(int(self.buckets.get(b, 0)) for b in BUCKETS),
            json.dumps(dict(sorted(self.repairs.items()))),
            self.flags,
            self.finish_reason,
            self.latency_s,
            self.first_token_s,
            self.prompt_tokens,
            self.completion_tokens,
        )


_INSERT: Final = (
    "INSERT INTO proxy_requests (id, created_at, model, quant, engine, mode, stream, tools, tool_choice, status, "
    f"error, calls, stage, formats, {', '.join(_COLUMNS)}, repairs, flags, finish_reason, latency_s, first_token_s, "
    "prompt_tokens, completion_tokens) VALUES (" + ", ".join(["?"] * (21 + len(_COLUMNS))) + ")"
)
_INSERT_RECORD: Final = "INSERT INTO proxy_records (request_id, request, output, answer) VALUES (?, ?, ?, ?)"


class Recorder:
    """Writes request rows to the store in batches, from a worker thread.

    ``add`` only appends to a list; a background task started with ``start`` flushes it every ``interval_s``
    (and ``stop`` flushes what is left), so the store is never written from a request's own path.
    """

    def __init__(self, store: StateStore, *, interval_s: float = 0.25) -> None:
        """Count into ``store``."""
        self.store = store
        self.interval_s = interval_s
        self._rows: list[RequestStats] = []
        self._task: asyncio.Task[None] | None = None

    def add(self, stats: RequestStats) -> None:
        """Queue one request's row."""
        self._rows.append(stats)

    def flush(self) -> int:
        """Write the queued rows now (one transaction); return how many were written."""
        rows, self._rows = self._rows, []
        if not rows:
            return 0
        with self.store.transaction():
            self.store.executemany(_INSERT, [r.row() for r in rows])
            records = [(r.id, *r.record) for r in rows if r.record is not None]
            if records:
                self.store.executemany(_INSERT_RECORD, records)
        return len(rows)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            if self._rows:
                await asyncio.to_thread(self.flush)

    def start(self) -> None:
        """Start flushing in the background (call inside the server's event loop)."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        """Stop the background flush and write what is left."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await asyncio.to_thread(self.flush)


@dataclass(frozen=True, slots=True)
class Rates:
    """The parse-repair rates of one model and quantization.

    Attributes:
        model: the model.
        quant: the quantization label.
        requests: requests counted.
        tool_requests: requests that declared tools and were parsed.
        errors: requests answered with an error.
        calls: calls answered.
        buckets: candidates per bucket.
        repairs: repairs per kind.
        latency_p50_s: median latency of the parsed requests.
    """

    model: str
    quant: str
    requests: int
    tool_requests: int
    errors: int
    calls: int
    buckets: Mapping[str, int]
    repairs: Mapping[str, int]
    latency_p50_s: float | None

    @property
    def candidates(self) -> int:
        """Call candidates found, accepted or not."""
        return sum(self.buckets.values())

    def rate(self, *buckets: str) -> float | None:
        """The share of candidates in the given buckets (``None`` when there were none)."""
        total = self.candidates
        return sum(self.buckets.get(b, 0) for b in buckets) / total if total else None


def rates(store: StateStore) -> list[Rates]:
    """The parse-repair rates of every model and quantization in the store, busiest first."""
    sums = ", ".join(f"SUM({c})" for c in _COLUMNS)
    rows = store.fetchall(
        "SELECT model, quant, COUNT(*), SUM(CASE WHEN mode <> 'forward' AND tools > 0 THEN 1 ELSE 0 END), "
        f"SUM(CASE WHEN status <> 200 THEN 1 ELSE 0 END), SUM(calls), {sums} "
        "FROM proxy_requests GROUP BY model, quant ORDER BY COUNT(*) DESC, model, quant"
    )
    out: list[Rates] = []
    for row in rows:
        model, quant = str(row[0]), str(row[1])
        repairs: Counter[str] = Counter()
        latencies: list[float] = []
        for kinds, latency, tools in store.fetchall(
            "SELECT repairs, latency_s, tools FROM proxy_requests WHERE model = ? AND quant = ?", (model, quant)
        ):
            repairs.update({str(k): int(v) for k, v in json.loads(kinds).items()})
            if tools:
                latencies.append(float(latency))
        latencies.sort()
        out.append(
            Rates(
                model=model,
                quant=quant,
                requests=int(row[2]),
                tool_requests=int(row[3] or 0),
                errors=int(row[4] or 0),
                calls=int(row[5] or 0),
                buckets={b: int(v or 0) for b, v in zip(BUCKETS, row[6:], strict=True)},
                repairs=dict(repairs),
                latency_p50_s=latencies[len(latencies) // 2] if latencies else None,
            )
        )
    return out


def has_requests(store: StateStore) -> bool:
    """Whether the store holds any counted request."""
    return store.fetchone("SELECT 1 FROM proxy_requests LIMIT 1") is not None


def record_json(request: Mapping[str, Any], output: Mapping[str, Any], answer: Any) -> tuple[str, str, str]:
    """The three bodies kept with ``--record``."""
    return (
        json.dumps(dict(request), ensure_ascii=False),
        json.dumps(dict(output), ensure_ascii=False),
        json.dumps(answer, ensure_ascii=False),
    )


def bucket_names() -> Sequence[str]:
    """Every bucket, in report order."""
    return BUCKETS
