"""bench backend: ratio and median helpers, targets, table and JSON shape, and the CLI without llama-server."""

from __future__ import annotations

import json
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import tooldispatch.bench.backend as bench_backend_module
from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.bench.backend import (
    NO_SERVER_NOTE,
    LlamaServer,
    agent_overhead,
    backend_sample,
    bare_sample,
    decode_request,
    find_llama_server,
    scripted_turns,
)
from tooldispatch.bench.backend_report import (
    BackendReport,
    DecodeRow,
    DecodeSample,
    OverheadRow,
    Settings,
    median,
    paired_ratio,
    ratio,
    schedule,
    targets,
)
from tooldispatch.cli import backend_bench
from tooldispatch.errors import BackendUnavailable, ConfigError

SETTINGS = Settings(
    model="smollm2-135m-instruct@Q4_1",
    model_path="/m/Q4_1.gguf",
    threads=1,
    n_ctx=2048,
    seed=0,
    max_tokens=101,
    rounds=2,
    agent_runs=1,
    scripted_runs=2,
    task="assign-north",
    prompt_tokens=50,
)


def _row(key: str, seconds: list[float], cpu: float | None = None) -> DecodeRow:
    return DecodeRow(key, f"{key} row", tuple(DecodeSample(101, s, cpu, "length") for s in seconds))


def _report(*, server: bool, share: float = 0.005) -> BackendReport:
    decode = (
        _row("llamacpp", [4.0, 5.0], cpu=1.0),  # 25 and 20 tok/s
        _row("bare", [4.0, 4.0], cpu=0.9),  # 25 and 25 tok/s
        _row("llama-server", [2.0, 2.5])
        if server
        else DecodeRow("llama-server", "llama-server row", note=NO_SERVER_NOTE),
    )
    overhead = (
        OverheadRow("llamacpp", "assign-north", 1, 3, 10.0, 10.0 * share, (share,), ("final_answer",)),
        OverheadRow("scripted", "assign-north", 2, 10, 0.05, 0.002, (0.04, 0.04), ("final_answer", "final_answer")),
    )
    return BackendReport(SETTINGS, decode, overhead, (1.5, 1.0, 0.5), (2.5, 1.0, 0.5), 2)


def test_median_and_ratio_helpers() -> None:
    """median is None when empty; ratio refuses missing or non-positive denominators."""
    assert (median([]), median([3.0, 1.0, 2.0]), median([1.0, 4.0])) == (None, 2.0, 2.5)
    assert (ratio(1.0, 4.0), ratio(None, 1.0), ratio(1.0, None), ratio(1.0, 0.0)) == (0.25, None, None, None)


def test_paired_ratio_is_the_median_of_per_round_ratios() -> None:
    """Ratios are taken round by round, then their median, so a drifting load cancels out."""
    assert paired_ratio([10.0, 20.0, 30.0], [10.0, 10.0, 40.0]) == 1.0
    assert paired_ratio([10.0, 5.0], [0.0, 10.0]) == 0.5
    assert paired_ratio([], [1.0]) is None


def test_schedule_alternates_direction_each_round() -> None:
    """Rows run forward then backward (ABBA), each once per round."""
    assert schedule(["a", "b", "c"], 3) == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]


def test_decode_sample_counts_decode_steps_like_llama_server() -> None:
    """tok/s is (tokens - 1) over first-to-last seconds; CPU per step divides by the steps it covers."""
    sample = DecodeSample(tokens=101, seconds=4.0, cpu_seconds=1.0)
    assert (sample.tokens_per_s, sample.cpu_ms_per_step) == (25.0, 10.0)
    assert DecodeSample(tokens=100, seconds=2.0, cpu_seconds=1.0, cpu_steps=100).cpu_ms_per_step == 10.0
    assert (DecodeSample(1, 1.0).tokens_per_s, DecodeSample(5, 0.0).tokens_per_s) == (0.0, 0.0)
    assert DecodeSample(5, 1.0).cpu_ms_per_step is None


def test_targets_met_missed_and_not_measured() -> None:
    """The decode ratio uses per-round ratios; a missing llama-server row is NOT MEASURED with its note."""
    report = _report(server=False, share=0.03)
    by_name = {t.name: t for t in report.targets}
    bare = by_name["llamacpp / bare create_completion"]
    assert (bare.value, bare.status) == (0.9, "MISSED")
    assert bare.detail == "median of 2 per-round ratios; medians 22.5 vs 25.0 tok/s; CPU 10.00 vs 9.00 ms/token"
    server = by_name["llamacpp / llama-server"]
    assert (server.value, server.status, server.detail) == (None, "NOT MEASURED", NO_SERVER_NOTE)
    loop = by_name["agent loop overhead / wall"]
    assert (loop.value, loop.status) == (0.03, "MISSED")


def test_targets_met_with_server() -> None:
    """With llama-server measured, its ratio is ours over its rate round by round."""
    report = _report(server=True)
    assert [(t.name, t.status) for t in report.targets] == [
        ("llamacpp / bare create_completion", "MISSED"),
        ("llamacpp / llama-server", "MISSED"),
        ("agent loop overhead / wall", "MET"),
    ]
    assert report.targets[1].value == 0.5
    assert targets((), ())[2].status == "NOT MEASURED"


def test_json_shape() -> None:
    """--json carries settings, machine load, every row with its samples, loop rows and target statuses."""
    data = _report(server=False).to_json()
    assert list(data) == ["settings", "machine", "decode", "agent_overhead", "targets"]
    assert data["settings"]["max_tokens"] == 101
    assert data["machine"] == {"cpus": 2, "load_before": [1.5, 1.0, 0.5], "load_after": [2.5, 1.0, 0.5]}
    assert [(r["key"], r["measured"], r["tokens_per_s"], r["tokens"]) for r in data["decode"]] == [
        ("llamacpp", True, 22.5, 101),
        ("bare", True, 25.0, 101),
        ("llama-server", False, None, None),
    ]
    assert data["decode"][2]["note"] == NO_SERVER_NOTE
    assert data["decode"][0]["samples"][0] == {
        "tokens": 101,
        "seconds": 4.0,
        "cpu_seconds": 1.0,
        "finish": "length",
        "tokens_per_s": 25.0,
    }
    assert [(o["backend"], o["turns"], o["ms_per_turn"]) for o in data["agent_overhead"]] == [
        ("llamacpp", 3, 16.667),
        ("scripted", 10, 0.2),
    ]
    assert [t["status"] for t in data["targets"]] == ["MISSED", "NOT MEASURED", "MET"]
    assert json.loads(json.dumps(data)) == data


def test_tables_shape() -> None:
    """Three tables: decode rows (the absent server row says how to build it), loop rows, targets."""
    decode, loop, goals = backend_bench.tables(_report(server=False))
    assert [str(c.header) for c in decode.columns] == [
        "engine",
        "tok/s",
        "tokens",
        "CPU ms/token",
        "llamacpp vs row",
        "row vs llama-server",
    ]
    assert list(decode.columns[1].cells) == ["22.5", "25.0", NO_SERVER_NOTE]
    assert list(decode.columns[4].cells) == ["-", "0.900", "-"]
    assert list(loop.columns[7].cells) == ["0.50%", "4.00%"]
    assert list(goals.columns[3].cells) == ["[bold red]MISSED[/]", "[yellow]NOT MEASURED[/]", "[green]MET[/]"]


def _app() -> typer.Typer:
    app = typer.Typer()
    bench = typer.Typer()
    backend_bench.register(app, bench)
    app.add_typer(bench, name="bench")
    return app


def test_cli_without_llama_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """No binary found: run gets llama_server=None and the row says how to build llama-server."""
    seen: dict[str, Any] = {}

    def fake_run(**kwargs: Any) -> BackendReport:
        seen.update(kwargs)
        return _report(server=False)

    monkeypatch.setattr(bench_backend_module, "find_llama_server", lambda explicit: None)
    monkeypatch.setattr(bench_backend_module, "run", fake_run)
    result = CliRunner().invoke(_app(), ["bench", "backend", "--json", "--rounds", "2"])
    assert result.exit_code == 0, result.output
    assert (seen["llama_server"], seen["rounds"], seen["threads"]) == (None, 2, 1)
    data = json.loads(result.stdout)
    assert (
        data["decode"][2]["note"] == "not measured: no llama-server binary; build it with scripts/build-llama-server.sh"
    )


def test_cli_missing_model_names_the_pull_command(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A model that is not in the cache exits 2 with the exact pull command."""
    monkeypatch.setenv("TOOLDISPATCH_MODELS_DIR", str(tmp_path))
    monkeypatch.setattr(bench_backend_module, "find_llama_server", lambda explicit: None)
    result = CliRunner().invoke(_app(), ["bench", "backend"])
    assert result.exit_code == 2
    assert "run: tooldispatch models pull smollm2-135m-instruct@Q4_1" in result.output


def _executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_find_llama_server_order(tmp_path: Path) -> None:
    """An explicit path wins, then PATH, then the built binary; none of them gives None."""
    built = _executable(tmp_path / "built")
    explicit = _executable(tmp_path / "explicit")
    assert find_llama_server(explicit, which=lambda _: "/usr/bin/llama-server", home=built) == explicit
    assert find_llama_server(None, which=lambda _: "/usr/bin/llama-server", home=built) == Path("/usr/bin/llama-server")
    assert find_llama_server(None, which=lambda _: None, home=built) == built
    assert find_llama_server(None, which=lambda _: None, home=tmp_path / "absent") is None


def test_find_llama_server_rejects_a_bad_explicit_path(tmp_path: Path) -> None:
    """--llama-server pointing at no executable is a ConfigError naming the build script."""
    with pytest.raises(ConfigError, match=re.escape("scripts/build-llama-server.sh")):
        find_llama_server(tmp_path / "nope")


def test_llama_server_command_matches_in_process_settings() -> None:
    """The server gets the same threads and context, one slot, flash attention off, and 127.0.0.1."""
    server = LlamaServer(Path("/b/llama-server"), Path("/m.gguf"), threads=2, n_ctx=1024)
    assert server.command(8123) == [
        "/b/llama-server", "-m", "/m.gguf", "--host", "127.0.0.1", "--port", "8123",
        "-t", "2", "-tb", "2", "-c", "1024", "-np", "1", "-fa", "off", "--no-webui",
    ]  # fmt: skip


class _FakeLlama:
    def __init__(self, pieces: int, reason: str) -> None:
        self.pieces, self.reason = pieces, reason
        self.kwargs: dict[str, Any] = {}

    def create_completion(self, prompt: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.kwargs = {"prompt": prompt, **kwargs}
        for _ in range(self.pieces):
            yield {"choices": [{"text": "1,", "finish_reason": None}]}
        yield {"choices": [{"text": "", "finish_reason": self.reason}]}


def test_bare_sample_counts_tokens() -> None:
    """A length finish means max_tokens tokens; a stop finish counts the token chunks; sampling is greedy."""
    llm = _FakeLlama(7, "length")
    assert (bare_sample(llm, "p", max_tokens=9, seed=3).tokens, llm.kwargs["temperature"]) == (9, 0.0)
    assert (llm.kwargs["stream"], llm.kwargs["seed"], llm.kwargs["prompt"]) == (True, 3, "p")
    assert bare_sample(_FakeLlama(4, "stop"), "p", max_tokens=9, seed=0).tokens == 4


def test_backend_sample_reads_usage_and_finish() -> None:
    """The backend row takes completion tokens from Usage and the finish reason from Finish."""
    backend = ScriptedBackend([ScriptedTurn(content="x" * 40, finish_reason="length")])
    sample = backend_sample(backend, decode_request(16, 0))
    assert (sample.tokens, sample.finish) == (10, "length")
    assert backend.requests[0].max_tokens == 16


def test_scripted_agent_run_finishes_the_task() -> None:
    """The scripted turns drive the real loop and dispatcher through assign-north to a final answer."""
    row = agent_overhead(
        lambda: ScriptedBackend(scripted_turns()), backend="scripted", task_id="assign-north", runs=2, max_tokens=64
    )
    assert (row.runs, row.turns, row.ends, len(row.shares)) == (2, 10, ("final_answer", "final_answer"), 2)


def test_agent_overhead_unknown_task() -> None:
    """An unknown demo task id is a ConfigError listing the tasks."""
    with pytest.raises(ConfigError, match="assign-north"):
        agent_overhead(lambda: ScriptedBackend([]), backend="scripted", task_id="nope", runs=1, max_tokens=8)


def test_llama_server_that_exits_is_backend_unavailable_with_its_log(tmp_path: Path) -> None:
    """A server process that dies at start-up raises BackendUnavailable quoting the end of its log."""
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\necho 'error: unknown argument'\nexit 1\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    server = LlamaServer(binary, tmp_path / "m.gguf", threads=1, n_ctx=512, startup_s=30)
    with pytest.raises(BackendUnavailable, match=r"exited with 1:\nerror: unknown argument"):
        server.start()


def test_llama_server_that_never_gets_healthy_is_stopped(tmp_path: Path) -> None:
    """A server that never answers /health is stopped after startup_s, with its log in the error."""
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\necho 'loading model'\nexec sleep 30\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    server = LlamaServer(binary, tmp_path / "m.gguf", threads=1, n_ctx=512, startup_s=2)
    with pytest.raises(BackendUnavailable, match=r"within 2 s:\nloading model"):
        server.start()
    assert server.cpu_seconds() is None
