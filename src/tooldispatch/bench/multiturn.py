"""BFCL multi-turn through the agent loop and the dispatcher, scored by BFCL's own checker.

For each case a fresh environment is built from its ``initial_config`` (``bfcl_multiturn.new_environment``),
its functions are registered as tools in a ``Registry`` with the metadata of ``TOOL_CLASSES``, and each user
turn is run by ``Agent`` to its end, continuing the conversation of the turns before it. BFCL's rules:

- a turn ends when the model answers without a call (an output the parser cannot use gets the runtime's
  feedback instead, as in any agent run: that is part of what is measured);
- a turn whose model kept calling for more than BFCL's step limit (``MAXIMUM_STEP_LIMIT``, 20) is force-quit
  and the conversation stops there, so the case fails; a run that stops for another reason (wall time, a
  context window that is full, the backend, the agent's own stuck detection) stops the conversation too;
- at a ``miss_func`` turn the held-out functions are registered and offered, and the user's message is BFCL's
  own (``added_functions_message``).

The calls scored are the calls the environment executed (each tool records its own invocation), turn by
turn: a call the dispatcher refused (schema, unknown tool) or answered from its idempotency record never
reached the environment, so BFCL's checker does not see it either.

``ground_truth_backend`` is a scripted model that makes exactly BFCL's ground-truth calls in each turn; run
through the same path it must score 100 %, which checks the harness without a model.
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from tooldispatch.backends.base import Backend, ChatRequest
from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.bench import bfcl_multiturn as bfcl
from tooldispatch.bench.bfcl_data import function_to_tool
from tooldispatch.bench.corpus import CORPUS_NAME, Cell, OutputRecord, write_corpus
from tooldispatch.bench.cuts import (
    CUTS,
    FULL,
    Cut,
    paired_cuts,
    paired_totals,
    render_paired_cuts,
    render_paired_totals,
)
from tooldispatch.bench.results_db import ResultsDB
from tooldispatch.bench.runner import Target
from tooldispatch.bench.stats import exact_rate
from tooldispatch.bench.targets import MatrixSpec
from tooldispatch.dispatch import Dispatcher, Registry
from tooldispatch.errors import BackendError, ConfigError
from tooldispatch.types import ACCEPTED_BUCKETS

ToolClass = Literal["read", "write", "delete"]

CLASS_REASONS: Mapping[ToolClass, str] = {
    "read": "returns what the environment holds or computes and changes nothing: read_only=True (bounded "
    "repair, no idempotency record). Not concurrency_safe: these reads depend on state that earlier calls of "
    "the same turn change (the working directory, a login), so every call runs in the order written",
    "write": "changes the environment (a file, a login, an order, the car): side-effecting, so repairs stay "
    "lossless and an identical call is answered from its idempotency record instead of acting twice",
    "delete": "removes or cancels something (a file, a message, an order, a booking): destructive. No approval "
    "is asked (requires_approval=False): the user's own message is the request, and no person is in the loop",
}
"""Why each class of function gets its metadata."""

TOOL_CLASSES: Mapping[str, ToolClass] = {
    # GorillaFileSystem
    **dict.fromkeys(("cat", "diff", "du", "find", "grep", "ls", "pwd", "sort", "tail", "wc"), "read"),
    **dict.fromkeys(("cd", "cp", "echo", "mkdir", "mv", "touch"), "write"),
    **dict.fromkeys(("rm", "rmdir"), "delete"),
    # MathAPI: every function computes
    **dict.fromkeys(
        (
            "absolute_value", "add", "divide", "imperial_si_conversion", "logarithm", "max_value", "mean",
            "min_value", "multiply", "percentage", "power", "round_number", "si_unit_conversion", "square_root",
            "standard_deviation", "subtract", "sum_values",
        ),
        "read",
    ),
    # MessageAPI
    **dict.fromkeys(
        (
            "get_message_stats", "get_user_id", "list_users", "message_get_login_status", "search_messages",
            "view_messages_sent",
        ),
        "read",
    ),
    **dict.fromkeys(("add_contact", "message_login", "send_message"), "write"),
    "delete_message": "delete",
    # TwitterAPI
    **dict.fromkeys(
        (
            "get_tweet", "get_tweet_comments", "get_user_stats", "get_user_tweets", "list_all_following",
            "posting_get_login_status", "search_tweets",
        ),
        "read",
    ),
    **dict.fromkeys(("authenticate_twitter", "comment", "follow_user", "mention", "post_tweet", "retweet"), "write"),
    "unfollow_user": "delete",
    # TicketAPI
    **dict.fromkeys(("get_ticket", "get_user_tickets", "ticket_get_login_status"), "read"),
    **dict.fromkeys(("create_ticket", "edit_ticket", "resolve_ticket", "ticket_login", "logout"), "write"),
    "close_ticket": "delete",
    # TradingBot
    **dict.fromkeys(
        (
            "filter_stocks_by_price", "get_account_info", "get_available_stocks", "get_current_time",
            "get_order_details", "get_order_history", "get_stock_info", "get_symbol_by_name",
            "get_transaction_history", "get_watchlist", "notify_price_change", "trading_get_login_status",
        ),
        "read",
    ),
    **dict.fromkeys(
        ("add_to_watchlist", "fund_account", "place_order", "trading_login", "trading_logout", "withdraw_funds"),
        "write",
    ),
    **dict.fromkeys(("cancel_order", "remove_stock_from_watchlist"), "delete"),
    # TravelAPI
    **dict.fromkeys(
        (
            "compute_exchange_rate", "get_all_credit_cards", "get_booking_history", "get_budget_fiscal_year",
            "get_credit_card_balance", "get_flight_cost", "get_nearest_airport_by_city", "list_all_airports",
            "retrieve_invoice", "travel_get_login_status", "verify_traveler_information",
        ),
        "read",
    ),
    **dict.fromkeys(
        (
            "authenticate_travel", "book_flight", "contact_customer_support", "purchase_insurance",
            "register_credit_card", "set_budget_limit",
        ),
        "write",
    ),
    "cancel_booking": "delete",
    # VehicleControlAPI
    **dict.fromkeys(
        (
            "check_tire_pressure", "displayCarStatus", "display_log", "estimate_distance",
            "estimate_drive_feasibility_by_mileage", "find_nearest_tire_shop", "gallon_to_liter",
            "get_current_speed", "get_outside_temperature_from_google", "get_outside_temperature_from_weather_com",
            "get_zipcode_based_on_city", "liter_to_gallon",
        ),
        "read",
    ),
    **dict.fromkeys(
        (
            "activateParkingBrake", "adjustClimateControl", "fillFuelTank", "lockDoors", "pressBrakePedal",
            "releaseBrakePedal", "setCruiseControl", "setHeadlights", "set_navigation", "startEngine",
        ),
        "write",
    ),
}  # fmt: skip
"""The class of every function of BFCL's multi-turn environments (reasons in ``CLASS_REASONS``)."""

_METADATA: Mapping[ToolClass, Mapping[str, Any]] = {
    "read": {"read_only": True, "concurrency_safe": False},
    "write": {"read_only": False, "destructive": False},
    "delete": {"read_only": False, "destructive": True, "requires_approval": False},
}


def tool_metadata(name: str) -> dict[str, Any]:
    """The ``Registry.register`` metadata of one BFCL function.

    Every class runs once per call (``max_attempts=1``): the environments are deterministic Python objects,
    so a retry would only repeat the same outcome (and a write twice).

    Raises:
        ConfigError: the function is not in ``TOOL_CLASSES``.
    """
    kind = TOOL_CLASSES.get(name)
    if kind is None:
        raise ConfigError(f"BFCL function {name!r} has no class in TOOL_CLASSES; add it as read, write or delete")
    return {**_METADATA[kind], "max_attempts": 1}


class ExecutionLog:
    """The calls the environment executed, as BFCL call strings, in order."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def tool(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        """The tool function the dispatcher invokes: it records the call, then runs the environment's method."""

        @functools.wraps(method)  # the registry reads the method's own parameters through the wrapper
        def invoke(**arguments: Any) -> Any:
            self.calls.append(bfcl.render_call(name, arguments))
            return json_result(method(**arguments))

        invoke.__name__ = invoke.__qualname__ = name
        return invoke


def json_result(value: Any) -> Any:
    """A method's result as JSON data. Some environments return values JSON cannot hold (``mpmath`` numbers);
    BFCL then shows the model their ``str``, and so does this."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return json.loads(json.dumps(value, default=str))
    return value


def register_functions(
    registry: Registry, docs: Sequence[Mapping[str, Any]], methods: Mapping[str, Any], log: ExecutionLog
) -> None:
    """Register BFCL function docs as tools that run the environment's methods.

    Raises:
        ConfigError: a documented function has no method in the environment, or no class in ``TOOL_CLASSES``.
    """
    for doc in docs:
        spec = function_to_tool(doc)
        method = methods.get(spec.name)
        if method is None:
            raise ConfigError(f"BFCL documents {spec.name!r}, which no environment class of the case defines")
        registry.register(
            spec.name,
            log.tool(spec.name, method),
            schema=spec.parameters,
            description=spec.description,
            source=f"bfcl:{type(method.__self__).__name__}.{spec.name}",
            **tool_metadata(spec.name),
        )


@dataclass(frozen=True, slots=True)
class MultiTurnOptions:
    """How each case runs.

    Attributes:
        max_tokens: completion budget per model turn.
        max_wall_s: wall-clock limit per user turn (``None``, the default: none, as in BFCL, which bounds a turn
            by its steps; a limit would fail cases for the machine's load, not the model).
        seed: the sampling seed (greedy decoding ignores it).
        temperature: sampling temperature (0: greedy).
    """

    max_tokens: int = 256
    max_wall_s: float | None = None
    seed: int = 0
    temperature: float = 0.0


async def run_case(
    case: bfcl.MultiTurnCase,
    backend: Backend,
    options: MultiTurnOptions,
    *,
    wheel: Path | None = None,
    cut: Cut = FULL,
) -> dict[str, Any]:
    """Run one case turn by turn and score it with BFCL's checker; return what the run stores.

    ``cut`` changes the agent's options (``bench.cuts``); the full runtime by default.

    Each user turn is its own dispatcher session: a user who asks again asks for a new action, so an identical
    write in a later turn runs, while an identical write repeated within a turn is answered from its record.
    """
    from tooldispatch.agent import Agent, Budget

    instances = bfcl.new_environment(case, wheel=wheel)
    methods = bfcl.environment_methods(instances)
    log = ExecutionLog()
    registry = Registry()
    register_functions(registry, case.functions, methods, log)
    dispatcher = Dispatcher(registry, store=":memory:")
    steps = bfcl.max_steps(wheel)
    history: tuple[dict[str, Any], ...] = ()
    executed: list[list[str]] = []
    transcripts: list[dict[str, Any]] = []
    end = "completed"
    started = time.monotonic()
    for index, text in enumerate(case.turns):
        if index in case.held_out:
            register_functions(registry, case.held_out[index], methods, log)
        task = text if text is not None else bfcl.added_functions_message(wheel)
        agent = Agent(
            backend=backend,
            dispatcher=dispatcher,
            budget=Budget(max_turns=steps + 1, max_wall_s=options.max_wall_s),
            max_tokens=options.max_tokens,
            temperature=options.temperature,
            seed=options.seed,
            session_id=f"{case.id}:turn{index}",
            **cut.agent_options,
        )
        first = len(log.calls)
        run = await agent.arun(task, history=history)
        executed.append(log.calls[first:])
        history = _with_answer(run.messages, run.final_answer)
        transcript = run.to_dict()
        transcript.pop("messages")
        transcripts.append(transcript)
        if run.end != "final_answer":
            end = "step_limit" if run.end == "max_turns" else run.end
            break
    verdict = bfcl.check(case, executed, wheel=wheel)
    turns = [t for tr in transcripts for t in tr["turns"]]
    return {
        "category": case.category,
        "passed": bool(verdict.get("valid")),
        "verdict": verdict,
        "end": end,
        "user_turns": len(transcripts),
        "model_turns": len(turns),
        "model_s": round(sum(float(t["model_s"]) for t in turns), 3),
        "wall_s": round(time.monotonic() - started, 3),
        "completion_tokens": sum(int((t["usage"] or {}).get("completion_tokens") or 0) for t in turns),
        "buckets": dict(Counter(c["bucket"] for t in turns for c in t["parse"].get("candidates", []))),
        "dispatch": dict(Counter(r["status"] for t in turns for r in t["tool_runs"])),
        "executed": executed,
        "transcripts": transcripts,
        "messages": list(history),
    }


def _with_answer(messages: Sequence[dict[str, Any]], answer: str | None) -> tuple[dict[str, Any], ...]:
    """The conversation to continue from: a plain-text final answer is not in the run's messages (an answer given
    through the answer tool is), and the next turn's model must see it, as BFCL's does."""
    last = messages[-1] if messages else {}
    if answer is None or (last.get("role") == "assistant" and last.get("content") == answer):
        return tuple(messages)
    return (*messages, {"role": "assistant", "content": answer})


def ground_truth_backend(case: bfcl.MultiTurnCase, *, wheel: Path | None = None) -> ScriptedBackend:
    """A scripted model that makes exactly the case's ground-truth calls.

    In each user turn its outputs hold that turn's ground-truth calls in order (Hermes ``<tool_call>`` blocks,
    read by the same parser as a model's output), at most ``calls_per_step`` in one output (the agent's limit
    per model turn), and its next output is a plain answer that ends the turn; a turn whose ground truth is
    empty is answered at once. The turn is the number of user messages in the request, the step the number of
    assistant messages after the last one.
    """
    from tooldispatch.agent import Budget

    calls_per_step = Budget().max_calls_per_turn
    methods = bfcl.environment_methods(bfcl.new_environment(case, wheel=wheel))
    plans: list[list[str]] = []
    for turn in case.ground_truth:
        blocks = []
        for text in turn:
            name = text.split("(", 1)[0].strip()
            name, arguments = bfcl.parse_call(text, methods.get(name))
            blocks.append("<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}) + "\n</tool_call>")
        plans.append(["\n".join(blocks[i : i + calls_per_step]) for i in range(0, len(blocks), calls_per_step)])

    def script(request: ChatRequest) -> ScriptedTurn:
        users = [i for i, m in enumerate(request.messages) if m.get("role") == "user"]
        turn = len(users) - 1
        step = sum(1 for m in request.messages[users[-1] :] if m.get("role") == "assistant")
        if turn >= len(plans):
            raise ConfigError(f"{case.id}: turn {turn} was requested; the ground truth has {len(plans)} turns")
        if step < len(plans[turn]):
            return ScriptedTurn(content=plans[turn][step], chunk=4096)
        return ScriptedTurn(content="Done.", chunk=4096)

    return ScriptedBackend(script)


GROUND_TRUTH_CELL = Cell(backend="scripted", model="bfcl-ground-truth", quant="none")
"""The cell of a ground-truth replay."""


async def run_multi_turn(
    targets: Sequence[Target],
    cases: Sequence[bfcl.MultiTurnCase],
    db: ResultsDB,
    options: MultiTurnOptions,
    *,
    backend_for_case: Callable[[bfcl.MultiTurnCase], Backend] | None = None,
    wheel: Path | None = None,
    on_done: Callable[[str, str, bool], None] | None = None,
) -> int:
    """Run every (cell, case) not yet stored, storing each case as it finishes; return how many ran now.

    Args:
        targets: the cells; each backend is built once, when its cell has work left.
        cases: the cases.
        db: where results go (and what is already done is read from).
        options: budgets and sampling.
        backend_for_case: a backend built per case instead of the cell's (the ground-truth replay).
        wheel: the ``bfcl-eval`` wheel.
        on_done: called with ``(cell_key, case_id, passed)`` after each case.
    """
    done = db.done()
    ran = 0
    for target in targets:
        pending = [c for c in cases if (target.cell.key, c.id, options.seed) not in done]
        if not pending:
            continue
        shared = target.make_backend() if backend_for_case is None else None
        try:
            for case in pending:
                backend = shared if shared is not None else backend_for_case(case)  # type: ignore[misc]
                started = time.monotonic()
                error: str | None = None
                try:
                    result = await run_case(case, backend, options, wheel=wheel, cut=CUTS[target.cell.cut])
                except BackendError as exc:
                    result, error = {"category": case.category, "passed": False}, f"{type(exc).__name__}: {exc}"
                db.add(_record(target, case, options, result, time.monotonic() - started, error))
                ran += 1
                if on_done:
                    on_done(target.cell.key, case.id, bool(result["passed"]))
        finally:
            close = getattr(shared, "close", None)
            if callable(close):
                close()
    return ran


def _record(
    target: Target,
    case: bfcl.MultiTurnCase,
    options: MultiTurnOptions,
    result: dict[str, Any],
    seconds: float,
    error: str | None,
) -> OutputRecord:
    cell = target.cell
    return OutputRecord(
        cell=cell.key,
        case_id=case.id,
        seed=options.seed,
        case={"id": case.id, "category": case.category, "turns": list(case.turns)},
        model=cell.model,
        quant=cell.quant,
        tensor_types=dict(target.facts.tensor_types),
        model_file=target.facts.model_file,
        engine="llama.cpp" if cell.backend == "llamacpp" else cell.backend,
        engine_version=target.facts.engine_version,
        backend=cell.backend,
        constrained=cell.constrained,
        text="",
        latency_s=seconds,
        completion_tokens=int(result.get("completion_tokens") or 0),
        error=error,
        extra=result,
    )


def summarize_multi_turn(records: Sequence[OutputRecord]) -> list[dict[str, Any]]:
    """One row per (cell, category): pass rate with its exact 95 % interval (Clopper–Pearson), turns and model
    time per case, where runs ended, BFCL's error types, and the parse buckets of every model output."""
    groups: dict[tuple[str, str], list[OutputRecord]] = {}
    for r in records:
        category = str(r.extra.get("category") or "")
        if category in bfcl.MULTI_TURN_CATEGORIES:
            groups.setdefault((r.cell, category), []).append(r)
    rows = []
    for (cell, category), group in sorted(groups.items()):
        n = len(group)
        rows.append(
            {
                "cell": cell,
                "category": category,
                "passed": exact_rate([bool(r.extra.get("passed")) for r in group]),
                "model_turns": sum(int(r.extra.get("model_turns") or 0) for r in group) / n,
                "model_s": sum(float(r.extra.get("model_s") or 0.0) for r in group) / n,
                "ends": dict(Counter(str(r.extra.get("end") or "error") for r in group)),
                "errors": dict(Counter(str((r.extra.get("verdict") or {}).get("error_type") or "ok") for r in group)),
                "buckets": dict(sum((Counter(dict(r.extra.get("buckets") or {})) for r in group), Counter())),
                "failed_ids": [r.case_id for r in group if not r.extra.get("passed")],
            }
        )
    return rows


def _outcomes(records: Sequence[OutputRecord]) -> dict[tuple[str, str], dict[str, bool]]:
    """Each (cell, category)'s multi-turn cases, passed or not."""
    outcomes: dict[tuple[str, str], dict[str, bool]] = {}
    for r in records:
        category = str(r.extra.get("category") or "")
        if category in bfcl.MULTI_TURN_CATEGORIES:
            outcomes.setdefault((r.cell, category), {})[r.case_id] = bool(r.extra.get("passed"))
    return outcomes


def run_measures(records: Sequence[OutputRecord]) -> dict[tuple[str, str], dict[str, dict[str, float]]]:
    """What each multi-turn case did on the way, for ``cuts.paired_totals``: user turns answered (the agent ended
    the turn with an answer), calls the environment ran, call attempts refused, model turns, and whether the case
    ended ``stuck``."""
    measures: dict[tuple[str, str], dict[str, dict[str, float]]] = {}
    for r in records:
        category = str(r.extra.get("category") or "")
        if category not in bfcl.MULTI_TURN_CATEGORIES:
            continue
        end = str(r.extra.get("end") or "error")
        buckets = dict(r.extra.get("buckets") or {})
        measures.setdefault((r.cell, category), {})[r.case_id] = {
            "user turns answered": int(r.extra.get("user_turns") or 0) - (end != "completed"),
            "calls run": sum(len(calls) for calls in r.extra.get("executed") or ()),
            "calls refused": sum(n for b, n in buckets.items() if b not in ACCEPTED_BUCKETS),
            "model turns": int(r.extra.get("model_turns") or 0),
            "ended stuck": int(end == "stuck"),
        }
    return measures


def render_multi_turn(rows: Sequence[Mapping[str, Any]]) -> str:
    """A Markdown table of multi-turn results."""
    if not rows:
        return "No multi-turn results yet.\n"
    lines = [
        "| cell | category | passed (exact 95 % CI) | model turns / case | model s / case | ends | BFCL verdicts "
        "| parse buckets (all turns) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ends = ", ".join(f"{k}: {v}" for k, v in sorted(row["ends"].items()))
        errors = ", ".join(f"{k}: {v}" for k, v in sorted(row["errors"].items()))
        buckets = ", ".join(f"{k}: {v}" for k, v in sorted(row["buckets"].items())) or "-"
        label = Cell.from_key(row["cell"]).label
        lines.append(
            f"| {label} | {row['category']} | {row['passed'].fmt()} | {row['model_turns']:.1f} | "
            f"{row['model_s']:.1f} | {ends} | {errors} | {buckets} |"
        )
    return "\n".join(lines) + "\n"


def run_multi_turn_command(
    *,
    categories: Sequence[str],
    limit: int | None,
    spec: MatrixSpec,
    ground_truth: bool,
    options: MultiTurnOptions,
    run_dir: Path,
    cuts: Sequence[Cut] = (FULL,),
    on_done: Callable[[str, str, bool], None] | None = None,
) -> str:
    """Run the multi-turn categories (resuming ``run_dir``) on the models ``spec`` names (llama.cpp in process, or a
    served model), or replay the ground truth (``spec`` unused), once per cut; write ``corpus.jsonl`` (every case
    with its transcripts) and ``report/multiturn.md``, and return the report's tables."""
    from tooldispatch.bench.bfcl_data import ensure_wheel
    from tooldispatch.bench.targets import build_targets

    unknown = [c for c in categories if c not in bfcl.MULTI_TURN_CATEGORIES]
    if unknown:
        raise ConfigError(
            f"{', '.join(unknown)}: run single-turn and multi-turn categories separately (multi-turn: "
            f"{', '.join(bfcl.MULTI_TURN_CATEGORIES)})"
        )
    wheel = ensure_wheel()
    cases = bfcl.load_multi_turn_cases(categories, limit=limit, wheel=wheel)
    if ground_truth:
        targets: list[Target] = [Target(cell=GROUND_TRUTH_CELL, make_backend=_no_shared_backend)]

        def per_case(case: bfcl.MultiTurnCase) -> Backend:
            return ground_truth_backend(case, wheel=wheel)

        backend_for_case: Callable[[bfcl.MultiTurnCase], Backend] | None = per_case
    else:
        targets, backend_for_case = build_targets(spec), None
    targets = [replace(t, cell=replace(t.cell, cut=cut.name)) for t in targets for cut in cuts]
    db = ResultsDB(run_dir)
    try:
        asyncio.run(
            run_multi_turn(targets, cases, db, options, backend_for_case=backend_for_case, wheel=wheel, on_done=on_done)
        )
        records = list(db.records())
        write_corpus(run_dir / CORPUS_NAME, records)
        text = render_multi_turn(summarize_multi_turn(records))
        paired = render_paired_cuts(paired_cuts(_outcomes(records)))
        if paired:
            text += "\n## Each cut against the full runtime, case by case\n\n" + paired
            text += "\n### What each cut changed on the way, over the same cases\n\n"
            text += render_paired_totals(paired_totals(run_measures(records)))
    finally:
        db.close()
    out = run_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    (out / "multiturn.md").write_text("# BFCL multi-turn\n\n" + text, encoding="utf-8")
    return text


def _no_shared_backend() -> Backend:
    raise ConfigError("the ground-truth replay builds one scripted backend per case")
