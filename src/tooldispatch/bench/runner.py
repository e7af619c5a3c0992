"""Run BFCL cases over a matrix of cells, storing every raw output as it lands.

Each cell (backend × model × quantization × parse mode × constrained) gets its backend built only when it
has work left, runs its pending (case, seed) pairs with at most ``concurrency`` requests in flight, and
closes it. Failures split three ways:

- the server is unreachable or rate-limited (``BackendUnavailable``, ``RateLimited``, retryable errors):
  every request pauses (``retry_after`` when the server gave one, else exponential backoff) and tries again,
  up to ``max_attempts``; what still fails is left unstored and runs again on the next invocation;
- the request itself is refused (400, 404, 422): stored as an output with ``error`` set, scored as wrong;
- the account cannot run anything (401, 402, 403): the run stops with the server's message.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tooldispatch.backends.base import Backend, ChatRequest, Completion, collect
from tooldispatch.bench.bfcl_data import BfclCase, safe_tool_names
from tooldispatch.bench.corpus import Cell, OutputRecord, prompt_id
from tooldispatch.bench.results_db import ResultsDB
from tooldispatch.errors import BackendError, ConfigError, ProviderError, RateLimited

_FATAL_STATUS = frozenset({401, 402, 403})


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """What is known about the weights behind a cell, for the corpus.

    Attributes:
        family: the model family (selects the tool prompt format; equal across quantizations).
        tool_format: the family's documented tool-call format (the serving-stack baseline parses only it).
        tensor_types: the file's real tensor types, ``{type: count}``.
        model_file: the weights' file name.
        engine_version: the engine's version.
    """

    family: str = ""
    tool_format: str = ""
    tensor_types: Mapping[str, int] = field(default_factory=dict)
    model_file: str = ""
    engine_version: str = ""


@dataclass(frozen=True, slots=True)
class Target:
    """One cell to run and how to get its backend.

    Attributes:
        cell: the matrix cell.
        make_backend: builds the backend (called once, when the cell has work left).
        facts: provenance recorded with every output.
        request_extra: engine-specific request fields (OpenRouter ``provider`` is set on the backend itself).
        safe_names: rewrite tool names to ``[a-zA-Z0-9_-]`` (dots → underscores) for APIs that require it;
            the checker maps them back.
    """

    cell: Cell
    make_backend: Callable[[], Backend]
    facts: ModelFacts = field(default_factory=ModelFacts)
    request_extra: Mapping[str, Any] = field(default_factory=dict)
    safe_names: bool = False


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How requests are made.

    Attributes:
        seeds: sampling seeds; every case runs once per seed.
        max_tokens: completion budget per request.
        temperature: sampling temperature.
        concurrency: requests in flight per cell (1 for in-process engines).
        max_attempts: tries per request on retryable failures.
        backoff_s: first backoff; doubles per attempt.
        max_backoff_s: longest single wait.
    """

    seeds: Sequence[int] = (0,)
    max_tokens: int = 256
    temperature: float = 0.0
    concurrency: int = 1
    max_attempts: int = 6
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0


@dataclass(slots=True)
class RunResult:
    """What one invocation did.

    Attributes:
        stored: outputs stored now.
        skipped: (cell, case, seed) already stored by an earlier invocation.
        failed: requests that failed after every retry (run again next time), with the last error.
        pauses: how many times requests paused for a dead server or a rate limit.
    """

    stored: int = 0
    skipped: int = 0
    failed: list[tuple[str, str, int, str]] = field(default_factory=list)
    pauses: int = 0


Sleep = Callable[[float], Awaitable[None]]
ProgressHook = Callable[[str, int, int], None]
"""``(cell_key, done_in_cell, total_in_cell)`` after each stored output."""


class _Gate:
    """A shared pause: when one request hits a dead server or a rate limit, every request waits."""

    def __init__(self, sleep: Sleep) -> None:
        self._until = 0.0
        self._sleep = sleep

    def pause(self, seconds: float) -> None:
        self._until = max(self._until, time.monotonic() + seconds)

    async def wait(self) -> None:
        delay = self._until - time.monotonic()
        if delay > 0:
            await self._sleep(delay)


async def run_bfcl(
    targets: Sequence[Target],
    cases: Sequence[BfclCase],
    db: ResultsDB,
    options: RunOptions,
    *,
    on_progress: ProgressHook | None = None,
    on_cell_start: Callable[[str, int, int], None] | None = None,
    sleep: Sleep = asyncio.sleep,
    interleave_cells: bool = False,
) -> RunResult:
    """Run every (case, seed) not yet stored for every target, storing each output as it lands.

    Args:
        targets: the cells.
        cases: the BFCL cases.
        db: where outputs are stored (and what is already done is read from).
        options: seeds, budget, concurrency, retries.
        on_progress: called after each stored output.
        on_cell_start: called with ``(cell_key, already_done, total)`` before a cell runs.
        sleep: the pause function (tests pass a fake clock).
        interleave_cells: run case by case across all cells (every backend open at once) instead of cell by
            cell, so a run stopped early has the same cases in every cell.

    Raises:
        ProviderError: the provider refused the account (401, 402, 403); nothing more can run.
    """
    result = RunResult()
    done = db.done()
    work = [(case, seed) for seed in options.seeds for case in cases]
    plans: list[_CellRun] = []
    for target in targets:
        key = target.cell.key
        pending = [(c, s) for c, s in work if (key, c.id, s) not in done]
        result.skipped += len(work) - len(pending)
        plans.append(_CellRun(target, pending, len(work) - len(pending), len(work)))
    groups = [plans] if interleave_cells else [[p] for p in plans]
    for group in groups:
        active = [p for p in group if p.pending]
        for plan in group:
            if on_cell_start:
                on_cell_start(plan.target.cell.key, plan.already, plan.total)
        if not active:
            continue
        try:
            for plan in active:
                plan.backend = plan.target.make_backend()
            await _run_group(active, db, options, result, on_progress, sleep)
        finally:
            for plan in active:
                if plan.backend is not None:
                    await _close(plan.backend)
                    plan.backend = None
    return result


@dataclass(slots=True)
class _CellRun:
    target: Target
    pending: Sequence[tuple[BfclCase, int]]
    already: int
    total: int
    backend: Backend | None = None


async def _run_group(
    plans: Sequence[_CellRun],
    db: ResultsDB,
    options: RunOptions,
    result: RunResult,
    on_progress: ProgressHook | None,
    sleep: Sleep,
) -> None:
    limit = asyncio.Semaphore(max(1, options.concurrency))
    gates = {id(p): _Gate(sleep) for p in plans}
    counters = {id(p): p.already for p in plans}

    async def one(plan: _CellRun, case: BfclCase, seed: int) -> None:
        backend = plan.backend
        assert backend is not None
        async with limit:
            record = await _attempt(plan.target, backend, case, seed, options, gates[id(plan)], result)
        if record is None:
            return
        caps = backend.capabilities
        record.engine = record.engine or caps.engine
        record.engine_version = plan.target.facts.engine_version or caps.engine_version
        db.add(record)
        result.stored += 1
        counters[id(plan)] += 1
        if on_progress:
            on_progress(plan.target.cell.key, counters[id(plan)], plan.total)

    longest = max(len(p.pending) for p in plans)
    order = [(p, *p.pending[i]) for i in range(longest) for p in plans if i < len(p.pending)]
    tasks = [asyncio.create_task(one(plan, case, seed)) for plan, case, seed in order]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def _attempt(
    target: Target,
    backend: Backend,
    case: BfclCase,
    seed: int,
    options: RunOptions,
    gate: _Gate,
    result: RunResult,
) -> OutputRecord | None:
    tools = case.tools()
    name_map: dict[str, str] = {}
    if target.safe_names:
        tools, name_map = safe_tool_names(tools)
    request = ChatRequest(
        messages=[dict(m) for m in case.messages],
        tools=tools,
        max_tokens=options.max_tokens,
        temperature=options.temperature,
        seed=seed,
        tool_choice=target.cell.tool_choice,
        constrained=target.cell.constrained,
        extra=dict(target.request_extra),
    )
    last = ""
    for attempt in range(options.max_attempts):
        await gate.wait()
        started = time.monotonic()
        try:
            completion = await collect(backend.stream(request), started=started)
        except BackendError as exc:
            last = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, ProviderError) and exc.status in _FATAL_STATUS:
                raise
            if not exc.retryable:
                return _record(target, case, seed, request, name_map, None, started, error=last)
            retry_after = exc.retry_after if isinstance(exc, RateLimited) else None
            wait = retry_after if retry_after is not None else options.backoff_s * (2**attempt)
            if attempt + 1 < options.max_attempts:
                result.pauses += 1
                gate.pause(min(options.max_backoff_s, wait))
            continue
        return _record(target, case, seed, request, name_map, completion, started)
    result.failed.append((target.cell.key, case.id, seed, last))
    return None


def _record(
    target: Target,
    case: BfclCase,
    seed: int,
    request: ChatRequest,
    name_map: Mapping[str, str],
    completion: Completion | None,
    started: float,
    *,
    error: str | None = None,
) -> OutputRecord:
    cell = target.cell
    tools = [t.to_openai() for t in request.tools]
    extra: dict[str, Any] = {"tool_format": target.facts.tool_format, "family": target.facts.family}
    if name_map:
        extra["name_map"] = dict(name_map)
    record = OutputRecord(
        cell=cell.key,
        case_id=case.id,
        seed=seed,
        case=case.to_dict(),
        model=cell.model,
        quant=cell.quant,
        tensor_types=dict(target.facts.tensor_types),
        model_file=target.facts.model_file,
        backend=cell.backend,
        parse_mode=cell.parse_mode,
        constrained=cell.constrained,
        prompt_id=prompt_id(request.messages, tools, target.facts.family or cell.model),
        error=error,
        extra=extra,
    )
    if completion is None:
        record.latency_s = time.monotonic() - started
        return record
    record.text = completion.content
    record.reasoning = completion.reasoning
    record.native_calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in completion.native_calls]
    record.finish_reason = completion.finish_reason
    if completion.usage is not None:
        record.prompt_tokens = completion.usage.prompt_tokens
        record.completion_tokens = completion.usage.completion_tokens
        record.cost = completion.usage.cost
    record.latency_s = completion.model_s
    if completion.first_token_t is not None:
        record.first_token_s = max(0.0, completion.first_token_t - started)
    record.provider = completion.provider
    if completion.model:
        extra["served_model"] = completion.model
    return record


async def _close(backend: Backend) -> None:
    for name in ("aclose", "close"):
        method = getattr(backend, name, None)
        if callable(method):
            outcome = method()
            if asyncio.iscoroutine(outcome):
                await outcome
            return


def check_targets(targets: Sequence[Target]) -> None:
    """Reject a matrix with two targets on the same cell.

    Raises:
        ConfigError: two targets share a cell key.
    """
    seen: set[str] = set()
    for target in targets:
        if target.cell.key in seen:
            raise ConfigError(f"the matrix lists {target.cell.key} twice; remove the duplicate")
        seen.add(target.cell.key)
