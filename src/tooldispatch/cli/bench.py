"""``tooldispatch bench bfcl|suite|replay`` and ``tooldispatch report``: thin wrappers around ``tooldispatch.bench``."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tooldispatch.cli.agent import DEMO_MODEL
from tooldispatch.errors import ConfigError, TooldispatchError

if TYPE_CHECKING:
    from rich.console import Console

    from tooldispatch.bench.targets import MatrixSpec


def _out() -> Console:
    from rich.console import Console

    return Console()


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _seeds(value: str) -> list[int]:
    try:
        return [int(s) for s in _split(value)]
    except ValueError:
        raise typer.BadParameter(f"{value!r}: seeds are integers, comma-separated (0,1,2)") from None


def _constrained_modes(value: str) -> list[str]:
    modes = _split(value)
    for mode in modes:
        if mode not in ("off", "on", "required"):
            raise typer.BadParameter(f"{mode!r}: use off, on or required (or several, comma-separated)")
    return modes


_CONSTRAINED_HELP = (
    "Grammar-constrained decoding, one cell each: off, on (the model may answer; a call it starts follows "
    "the grammar), required (every output is a call); comma-separated."
)


_N_CTX_HELP = "llama.cpp context length (0: the model's own, capped at 16,384)."


_CATEGORIES_HELP = (
    "BFCL categories, comma-separated: single-turn ones, or the multi-turn ones (multi_turn_base, "
    "multi_turn_miss_param, multi_turn_miss_func, multi_turn_long_context: each case run by the agent loop and "
    "the dispatcher, scored by BFCL's checker)."
)
_GROUND_TRUTH_HELP = (
    "Multi-turn: replay BFCL's ground-truth calls through the same agent, dispatcher and checker (a scripted "
    "model; no model is loaded), to check the harness."
)
_CUTS_HELP = (
    "The runtime's variants to run, each a cell paired case by case with the full runtime: full, no-repair, "
    "strict-parsing, bare-feedback, no-repeat-guard, answer-tool (comma-separated)."
)


def _fail(exc: TooldispatchError) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(2) from exc


def _is_sqlite(path: Path) -> bool:
    """Whether ``path`` starts with SQLite's header (read only: the file is not opened as a database)."""
    try:
        with path.open("rb") as fh:
            return fh.read(16) == b"SQLite format 3\x00"
    except OSError:
        return False


def _summary_meta(path: Path) -> dict[str, object]:
    """The run description (commands, settings) of an earlier report's summary.json, kept by a replay of its corpus."""
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise TooldispatchError(f"--compare {path}: {exc}; pass the summary.json of an earlier report") from exc
    meta = old.get("meta") if isinstance(old, dict) else None
    if not isinstance(meta, dict):
        return {}
    return {k: v for k, v in meta.items() if k not in ("replayed", "policy")}


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add the benchmark commands to the ``tooldispatch`` app and its ``bench`` group."""
    bench.command("bfcl")(bfcl)
    bench.command("suite")(suite)
    bench.command("replay")(replay)
    app.command("report")(report)


_BACKEND_HELP = "Backend kind: llamacpp or openai_compat (openrouter: that with the OpenRouter dialect)."
_BASE_URL_HELP = "OpenAI-compatible server for --backend openai_compat."
_DIALECT_HELP = "Server dialect for --backend openai_compat: vllm, llama-server or openrouter."
_QUANT_LABEL_HELP = "Report label of a served model's weights (nvfp4)."
_PARSE_MODES_HELP = "client (raw text parsed here) and/or server."


def bfcl(
    models: Annotated[
        str, typer.Option("--models", "--model", help="llamacpp: name@QUANT,...; a server: the served model.")
    ] = DEMO_MODEL,
    categories: Annotated[str, typer.Option(help=_CATEGORIES_HELP)] = "simple_python,irrelevance",
    limit: Annotated[int, typer.Option(help="First N cases of each category (0: all).")] = 25,
    backend: Annotated[str, typer.Option(help=_BACKEND_HELP)] = "llamacpp",
    base_url: Annotated[str, typer.Option(help=_BASE_URL_HELP)] = "",
    dialect: Annotated[str, typer.Option(help=_DIALECT_HELP)] = "vllm",
    quant_label: Annotated[str, typer.Option(help=_QUANT_LABEL_HELP)] = "served",
    provider_quantizations: Annotated[str, typer.Option(help="OpenRouter: one pinned cell per quantization.")] = "",
    provider_only: Annotated[str, typer.Option(help="OpenRouter: provider slugs to allow.")] = "",
    parse_modes: Annotated[str, typer.Option(help=_PARSE_MODES_HELP)] = "client",
    constrained: Annotated[str, typer.Option(help=_CONSTRAINED_HELP)] = "off",
    seeds: Annotated[str, typer.Option(help="Sampling seeds; several give pass^k.")] = "0",
    max_tokens: Annotated[int, typer.Option(help="Completion budget per request.")] = 192,
    temperature: Annotated[float, typer.Option(help="Sampling temperature.")] = 0.0,
    concurrency: Annotated[int, typer.Option(help="Requests in flight (default: 1 local, 4 HTTP).")] = 0,
    threads: Annotated[int, typer.Option("--threads", min=0, help="llama.cpp CPU threads (0: its default).")] = 0,
    n_threads: Annotated[int | None, typer.Option("--n-threads", hidden=True, help="Old name of --threads.")] = None,
    n_ctx: Annotated[int, typer.Option(help=_N_CTX_HELP)] = 0,
    run_dir: Annotated[Path, typer.Option(help="Run folder; rerunning the same command resumes it.")] = Path(
        "runs/bfcl"
    ),
    progress: Annotated[bool, typer.Option(help="Show progress bars.")] = True,
    html: Annotated[bool, typer.Option(help="Also write report.html.")] = False,
    interleave_cells: Annotated[
        bool, typer.Option(help="Run case by case across all cells (all models loaded at once).")
    ] = False,
    ground_truth: Annotated[bool, typer.Option(help=_GROUND_TRUTH_HELP)] = False,
    cuts: Annotated[str, typer.Option(help="Multi-turn categories only. " + _CUTS_HELP)] = "full",
) -> None:
    """Run BFCL over a matrix (backend × model × quantization × parse mode × constrained × seed), store every
    raw output, and write a report. Interrupt it any time: the same command resumes where it stopped."""
    from tooldispatch.bench.targets import MatrixSpec, build_targets

    if any(c.startswith("multi_turn") for c in _split(categories)):
        served = MatrixSpec(
            backend=backend,
            models=_split(models),
            parse_modes=_split(parse_modes),
            base_url=base_url,
            dialect=dialect,
            quant_label=quant_label,
            n_threads=(n_threads if n_threads is not None else threads) or None,
            n_ctx=n_ctx or None,
        )
        _multi_turn(served, categories, limit, ground_truth, cuts, max_tokens, seeds, run_dir)
        return
    if cuts != "full":
        _fail(ConfigError("--cuts applies to the multi-turn categories, which run the agent"))
    from tooldispatch.bench.bfcl_data import load_cases
    from tooldispatch.bench.report import summarize, write_report
    from tooldispatch.bench.results_db import ResultsDB
    from tooldispatch.bench.runner import RunOptions
    from tooldispatch.bench.session import REPORT_DIR, run_session
    from tooldispatch.profiles.kinds import read_backend

    try:
        cats = _split(categories)
        cases = load_cases(cats, limit=limit or None)
        spec = MatrixSpec(
            backend=backend,
            models=_split(models),
            parse_modes=_split(parse_modes),
            constrained=_constrained_modes(constrained),
            base_url=base_url,
            dialect=dialect,
            quant_label=quant_label,
            provider_quantizations=_split(provider_quantizations),
            provider_only=_split(provider_only),
            n_threads=(n_threads if n_threads is not None else threads) or None,
            n_ctx=n_ctx or None,
        )
        targets = build_targets(spec)
        local = read_backend(backend)[0].in_process
        options = RunOptions(
            seeds=_seeds(seeds),
            max_tokens=max_tokens,
            temperature=temperature,
            concurrency=concurrency or (1 if local else 4),
        )
        meta = {
            "categories": cats,
            "limit": limit,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "seeds": list(options.seeds),
            "command": "tooldispatch " + shlex.join(sys.argv[1:]),
        }
        result = run_session(
            targets, cases, run_dir, options, meta=meta, progress=progress, interleave_cells=interleave_cells
        )
        _out().print(
            f"stored {result.stored} outputs, {result.skipped} already done, {len(result.failed)} failed, "
            f"{result.pauses} pauses"
        )
        for cell, case_id, seed, error in result.failed[:10]:
            _out().print(f"  [yellow]failed[/yellow] {cell} {case_id} seed={seed}: {error}")
        if result.failed:
            _out().print("rerun the same command to retry the failed requests; stored outputs are kept")
        db = ResultsDB(run_dir)
        try:
            summary = summarize(db.records(), meta=db.meta())
        finally:
            db.close()
        files = write_report(summary, run_dir / REPORT_DIR, html_too=html, title="BFCL")
        _out().print(f"report: {files[0]}")
    except TooldispatchError as exc:
        _fail(exc)


def _multi_turn(
    spec: MatrixSpec,
    categories: str,
    limit: int,
    ground_truth: bool,
    cuts: str,
    max_tokens: int,
    seeds: str,
    run_dir: Path,
) -> None:
    from tooldispatch.bench.cuts import parse_cuts
    from tooldispatch.bench.multiturn import MultiTurnOptions, run_multi_turn_command

    seed = _seeds(seeds)
    if len(seed) != 1:
        _fail(TooldispatchError("multi-turn runs take one seed (greedy decoding); run each seed in its own --run-dir"))

    def done(cell: str, case_id: str, passed: bool) -> None:
        typer.echo(f"{cell} {case_id}: {'passed' if passed else 'failed'}")

    try:
        text = run_multi_turn_command(
            categories=_split(categories),
            limit=limit or None,
            spec=spec,
            ground_truth=ground_truth,
            options=MultiTurnOptions(max_tokens=max_tokens, seed=seed[0]),
            run_dir=run_dir,
            cuts=parse_cuts(cuts),
            on_done=done,
        )
        typer.echo(text)
        typer.echo(f"report: {run_dir / 'report' / 'multiturn.md'}")
    except TooldispatchError as exc:
        _fail(exc)


def suite(
    models: Annotated[
        str, typer.Option("--models", "--model", help="llamacpp: name@QUANT,...; a server: the served model.")
    ] = DEMO_MODEL,
    backend: Annotated[str, typer.Option(help=_BACKEND_HELP)] = "llamacpp",
    base_url: Annotated[str, typer.Option(help=_BASE_URL_HELP)] = "",
    dialect: Annotated[str, typer.Option(help=_DIALECT_HELP)] = "vllm",
    quant_label: Annotated[str, typer.Option(help=_QUANT_LABEL_HELP)] = "served",
    parse_modes: Annotated[str, typer.Option(help=_PARSE_MODES_HELP)] = "client",
    constrained: Annotated[str, typer.Option(help=_CONSTRAINED_HELP)] = "off",
    max_tokens: Annotated[int, typer.Option(help="Completion budget per model turn.")] = 192,
    max_turns: Annotated[int, typer.Option(help="Model turns per task.")] = 6,
    n_ctx: Annotated[int, typer.Option(help=_N_CTX_HELP)] = 0,
    run_dir: Annotated[Path, typer.Option(help="Run folder; rerunning resumes it.")] = Path("runs/suite"),
    cuts: Annotated[str, typer.Option(help=_CUTS_HELP)] = "full",
    seeds: Annotated[str, typer.Option(help="Sampling seeds; several (with --temperature above 0) give pass^k.")] = "0",
    temperature: Annotated[float, typer.Option(help="Sampling temperature (0: greedy).")] = 0.0,
) -> None:
    """Run the project's own multi-turn tasks in the demo logistics world, scored by the world's final state
    (greedy decoding, as the agent loop runs it; rerunning the same command resumes)."""
    from tooldispatch.bench.cuts import parse_cuts
    from tooldispatch.bench.suite import SuiteOptions, run_suite_command
    from tooldispatch.bench.targets import MatrixSpec

    try:
        options = SuiteOptions(
            max_tokens=max_tokens,
            max_turns=max_turns,
            seeds=tuple(_seeds(seeds)),
            temperature=temperature,
        )
        spec = MatrixSpec(
            backend=backend,
            models=_split(models),
            parse_modes=_split(parse_modes),
            constrained=_constrained_modes(constrained),
            base_url=base_url,
            dialect=dialect,
            quant_label=quant_label,
            n_ctx=n_ctx or None,
        )
        text = run_suite_command(cuts=parse_cuts(cuts), spec=spec, options=options, run_dir=run_dir)
        _out().print(text)
    except TooldispatchError as exc:
        _fail(exc)


def replay(
    corpus: Annotated[Path, typer.Argument(help="A corpus.jsonl written by a benchmark run.")],
    out: Annotated[Path | None, typer.Option(help="Write a full report into this folder.")] = None,
    compare: Annotated[Path | None, typer.Option(help="A summary.json to compare accuracy against.")] = None,
    policy: Annotated[
        Path | None,
        typer.Option(
            "--policy",
            help="A tool policy file (TOML) declaring the cases' tools; default: every BFCL function read-only "
            "(pure computations). A file with no rules scores them as undeclared (side-effecting) tools.",
        ),
    ] = None,
) -> None:
    """Re-score a corpus with the current parser (no model needed; deterministic). A corpus of agent runs
    (multi-turn cases, suite runs) is replayed: each run's recorded model outputs through the current agent,
    dispatcher and checker."""
    from tooldispatch.bench.agent_replay import holds_agent_runs, replay_agent_corpus
    from tooldispatch.bench.bfcl_data import BFCL_POLICY
    from tooldispatch.bench.replay import compare_summaries, replay_corpus
    from tooldispatch.bench.report import write_report
    from tooldispatch.policy import load_policy

    if corpus.is_file() and holds_agent_runs(corpus):
        if out is not None or compare is not None or policy is not None:
            _fail(ConfigError("--out, --compare and --policy apply to single-turn corpora, not to agent runs"))
        try:
            typer.echo(replay_agent_corpus(corpus))
        except TooldispatchError as exc:
            _fail(exc)
        return
    try:
        declared = BFCL_POLICY if policy is None else load_policy(policy)
        old_meta = _summary_meta(compare) if compare is not None else {}
        summary, seconds, count = replay_corpus(corpus, policy=declared, meta=old_meta)
    except TooldispatchError as exc:
        _fail(exc)
        return
    _out().print(f"re-scored {count} outputs in {seconds:.2f} s ({count / max(seconds, 1e-9):.0f} outputs/s)")
    _out().print(f"tool policy: {declared.source}")
    for cell in summary.cells:
        acc = " ".join(f"{m}={100 * r.value:.1f}%" for m, r in cell.accuracy.items())
        _out().print(f"  {cell.label}: {acc}")
    if compare is not None:
        try:
            old = json.loads(compare.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            _fail(TooldispatchError(f"--compare {compare}: {exc}; pass the summary.json of an earlier report"))
            return
        if not isinstance(old, dict) or "cells" not in old:
            _fail(TooldispatchError(f"--compare {compare} is not a report's summary.json (no 'cells')"))
            return
        for line in compare_summaries(old, summary.to_dict()):
            _out().print("  " + line)
    if out is not None:
        files = write_report(summary, out, title="BFCL replay")
        _out().print(f"report: {files[0]}")


def report(
    run: Annotated[Path, typer.Argument(help="A run folder (with bench.db), a corpus.jsonl, or a proxy's state file.")],
    html: Annotated[bool, typer.Option(help="Also write report.html.")] = False,
    out: Annotated[Path | None, typer.Option(help="Output folder (default: RUN/report).")] = None,
) -> None:
    """Write the Markdown report, PNG charts and summary.json of a run (or the parse-repair rates of a proxy's
    traffic, from its state file)."""
    from tooldispatch.bench.corpus import read_corpus
    from tooldispatch.bench.report import summarize, write_report
    from tooldispatch.bench.results_db import DB_NAME, ResultsDB
    from tooldispatch.bench.session import REPORT_DIR
    from tooldispatch.proxy.report import is_proxy_store, write_proxy_report

    try:
        if run.is_file() and is_proxy_store(run):
            for f in write_proxy_report(run, out or run.parent / REPORT_DIR):
                _out().print(str(f))
            return
        if run.is_file() and _is_sqlite(run):
            raise ConfigError(
                f"{run} is a SQLite file without proxied requests; pass a benchmark run folder (with {DB_NAME}), "
                "its corpus.jsonl, or the state file of a proxy that has served requests"
            )
        if run.is_dir() and (run / DB_NAME).is_file():
            db = ResultsDB(run)
            try:
                summary = summarize(db.records(), meta=db.meta())
            finally:
                db.close()
            target = out or run / REPORT_DIR
        elif run.is_file():
            summary = summarize(read_corpus(run))
            target = out or run.parent / REPORT_DIR
        else:
            raise ConfigError(
                f"{run} is neither a run folder with {DB_NAME} nor a corpus file; pass what `tooldispatch bench "
                "bfcl --run-dir DIR` wrote (DIR, or DIR/corpus.jsonl)"
            )
        if not summary.cells:
            raise ConfigError(f"{run} holds no benchmark outputs to report; run `tooldispatch bench bfcl` first")
        files = write_report(summary, target, html_too=html, title="BFCL")
    except TooldispatchError as exc:
        _fail(exc)
        return
    for f in files:
        _out().print(str(f))
