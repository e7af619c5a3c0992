"""``tooldispatch bench backend``: decode speed of the in-process backend and the agent loop's own overhead.

Everything is measured side by side in one run, with the same model file, prompt, threads, seed and
completion budget for every row:

* **Decode tokens/s** of the ``llamacpp`` backend (``LlamaCppBackend.stream``), of bare
  ``llama_cpp.Llama.create_completion(prompt, stream=True)`` on the prompt the backend renders itself,
  and, when a ``llama-server`` binary is at hand, of llama.cpp's own server (``timings.predicted_per_second``
  of its ``/completion`` answer). Every rate counts decode steps the way llama-server does: tokens after the
  first, over the time from the first token to the last. The rows run in ABBA order (``A B C``, then
  ``C B A``, ...) so that a machine whose load drifts favours no row; each ratio is the median of the
  per-round ratios, each rate the median over rounds.
* **Agent loop overhead**: ``AgentRun.overhead_s / wall_s`` (wall time minus model and tool time) of the
  ``Agent`` on a demo-world task with the ``llamacpp`` backend, and the same loop over the scripted backend,
  whose near-zero model time shows the loop's absolute cost per turn.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tooldispatch.backends.base import Backend, ChatRequest, ContentDelta, Finish, Usage
from tooldispatch.errors import BackendUnavailable

DECODE_PROMPT = "Write a long story about a dragon who learns to cook. Use at least 500 words."
"""The user message of the decode rows: SmolLM2-135M greedily writes past 256 tokens on it."""

LLAMA_SERVER_HOME = Path.home() / ".cache" / "tooldispatch" / "llama-server" / "bin" / "llama-server"
"""Where ``scripts/build-llama-server.sh`` installs the binary."""

NO_SERVER_NOTE = "not measured: no llama-server binary; build it with scripts/build-llama-server.sh"

DECODE_TARGET = 0.95
OVERHEAD_TARGET = 0.02

RowKey = Literal["llamacpp", "bare", "llama-server"]


def median(values: Sequence[float]) -> float | None:
    """The median of ``values``, or ``None`` when there are none."""
    return float(statistics.median(values)) if values else None


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator``, or ``None`` when either is missing or the denominator is not positive."""
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def paired_ratio(ours: Sequence[float], theirs: Sequence[float]) -> float | None:
    """The median of the per-round ratios ``ours[i] / theirs[i]`` (rounds where either is missing are skipped)."""
    values = [r for a, b in zip(ours, theirs, strict=False) if (r := ratio(a, b)) is not None]
    return median(values)


def schedule(keys: Sequence[str], rounds: int) -> list[str]:
    """The run order over ``rounds``: ``keys`` forward, then backward, and so on (ABBA)."""
    order: list[str] = []
    for i in range(rounds):
        order.extend(keys if i % 2 == 0 else list(reversed(keys)))
    return order


@dataclass(frozen=True, slots=True)
class DecodeSample:
    """One timed generation.

    Attributes:
        tokens: completion tokens generated.
        seconds: from the first token to the last one (llama-server: its own ``predicted_ms``).
        cpu_seconds: process CPU time over the same span (in-process rows only).
        finish: why generation ended (``length`` when the budget was reached).
        cpu_steps: model evaluations ``cpu_seconds`` covers (0: ``tokens - 1``, the decode steps).
    """

    tokens: int
    seconds: float
    cpu_seconds: float | None = None
    finish: str | None = None
    cpu_steps: int = 0

    @property
    def cpu_ms_per_step(self) -> float | None:
        """Process CPU milliseconds per model evaluation, when CPU time was read."""
        steps = self.cpu_steps or self.tokens - 1
        if self.cpu_seconds is None or steps <= 0:
            return None
        return 1000 * self.cpu_seconds / steps

    @property
    def tokens_per_s(self) -> float:
        """Decode steps per second: the tokens after the first, over the seconds between first and last."""
        if self.tokens < 2 or self.seconds <= 0:
            return 0.0
        return (self.tokens - 1) / self.seconds


@dataclass(frozen=True, slots=True)
class DecodeRow:
    """One engine's decode samples, in round order.

    Attributes:
        key: ``llamacpp``, ``bare`` or ``llama-server``.
        label: what the row ran, for the table.
        samples: one sample per round (empty when the row was not measured).
        note: why the row was not measured, or what to know about it.
    """

    key: str
    label: str
    samples: tuple[DecodeSample, ...] = ()
    note: str = ""

    @property
    def measured(self) -> bool:
        """Whether the row has samples."""
        return bool(self.samples)

    @property
    def tokens_per_s(self) -> float | None:
        """Median decode rate over the rounds."""
        return median([s.tokens_per_s for s in self.samples])

    @property
    def tokens(self) -> int | None:
        """Median completion tokens per round."""
        value = median([float(s.tokens) for s in self.samples])
        return None if value is None else int(value)

    @property
    def cpu_ms_per_token(self) -> float | None:
        """Median process CPU milliseconds per model evaluation."""
        return median([v for s in self.samples if (v := s.cpu_ms_per_step) is not None])

    def rates(self) -> list[float]:
        """The per-round decode rates."""
        return [s.tokens_per_s for s in self.samples]


@dataclass(frozen=True, slots=True)
class OverheadRow:
    """The agent loop's own time on one backend.

    Attributes:
        backend: ``llamacpp`` or ``scripted``.
        task: the demo task id.
        runs: how many agent runs were measured.
        turns: model turns over all runs.
        wall_s: wall seconds over all runs.
        overhead_s: wall minus model and tool seconds, over all runs.
        shares: each run's ``overhead_s / wall_s``.
        ends: how each run ended.
    """

    backend: str
    task: str
    runs: int
    turns: int
    wall_s: float
    overhead_s: float
    shares: tuple[float, ...]
    ends: tuple[str, ...]

    @property
    def share(self) -> float | None:
        """Median share of wall time the loop spent on itself."""
        return median(self.shares)

    @property
    def ms_per_turn(self) -> float | None:
        """Loop overhead per model turn, in milliseconds."""
        return 1000 * self.overhead_s / self.turns if self.turns else None


@dataclass(frozen=True, slots=True)
class TargetCheck:
    """One target with its measured figure.

    Attributes:
        name: what is compared.
        value: the measured figure (``None``: not measured).
        target: the target as text (``>= 0.95``).
        met: whether the figure meets it (``None``: not measured).
        detail: how the figure was obtained, or why it was not.
    """

    name: str
    value: float | None
    target: str
    met: bool | None
    detail: str

    @property
    def status(self) -> str:
        """``MET``, ``MISSED`` or ``NOT MEASURED``."""
        if self.met is None:
            return "NOT MEASURED"
        return "MET" if self.met else "MISSED"


@dataclass(frozen=True, slots=True)
class Settings:
    """What every row shares.

    Attributes:
        model: ``name@QUANT`` of the model.
        model_path: the GGUF file.
        threads: CPU threads for every engine.
        n_ctx: context length for every engine.
        seed: sampling seed.
        max_tokens: completion budget per decode run and per agent turn.
        rounds: decode rounds (each row once per round).
        agent_runs: agent runs with the llamacpp backend.
        scripted_runs: agent runs with the scripted backend.
        task: the demo task id for the agent rows.
        agent_constrained: whether the llamacpp agent runs decode under the tool-call grammar.
        prompt_tokens: tokens of the rendered decode prompt.
    """

    model: str
    model_path: str
    threads: int
    n_ctx: int
    seed: int
    max_tokens: int
    rounds: int
    agent_runs: int
    scripted_runs: int
    task: str
    agent_constrained: bool = False
    prompt_tokens: int = 0


@dataclass(frozen=True, slots=True)
class BackendReport:
    """Everything one ``bench backend`` run measured.

    Attributes:
        settings: what every row shared.
        decode: the decode rows (``llamacpp``, ``bare``, ``llama-server``).
        overhead: the agent-loop rows (``llamacpp``, ``scripted``).
        load_before: the 1/5/15-minute load averages when the run started.
        load_after: the same when it ended.
        cpus: CPUs this process could use.
    """

    settings: Settings
    decode: tuple[DecodeRow, ...]
    overhead: tuple[OverheadRow, ...]
    load_before: tuple[float, float, float] = (0.0, 0.0, 0.0)
    load_after: tuple[float, float, float] = (0.0, 0.0, 0.0)
    cpus: int = 0
    targets: tuple[TargetCheck, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "targets", tuple(targets(self.decode, self.overhead)))

    def row(self, key: str) -> DecodeRow | None:
        """The decode row with ``key``, if present."""
        return next((r for r in self.decode if r.key == key), None)

    def to_json(self) -> dict[str, Any]:
        """The report as plain JSON data (``--json``)."""

        def rnd(x: float | None, digits: int = 4) -> float | None:
            return None if x is None else round(x, digits)

        return {
            "settings": {k: getattr(self.settings, k) for k in self.settings.__dataclass_fields__},
            "machine": {"cpus": self.cpus, "load_before": list(self.load_before), "load_after": list(self.load_after)},
            "decode": [
                {
                    "key": r.key,
                    "label": r.label,
                    "measured": r.measured,
                    "note": r.note,
                    "tokens_per_s": rnd(r.tokens_per_s, 2),
                    "tokens": r.tokens,
                    "cpu_ms_per_token": rnd(r.cpu_ms_per_token, 3),
                    "samples": [
                        {
                            "tokens": s.tokens,
                            "seconds": round(s.seconds, 4),
                            "cpu_seconds": rnd(s.cpu_seconds),
                            "finish": s.finish,
                            "tokens_per_s": round(s.tokens_per_s, 2),
                        }
                        for s in r.samples
                    ],
                }
                for r in self.decode
            ],
            "agent_overhead": [
                {
                    "backend": o.backend,
                    "task": o.task,
                    "runs": o.runs,
                    "turns": o.turns,
                    "wall_s": round(o.wall_s, 4),
                    "overhead_s": round(o.overhead_s, 5),
                    "share": rnd(o.share, 5),
                    "ms_per_turn": rnd(o.ms_per_turn, 3),
                    "ends": list(o.ends),
                }
                for o in self.overhead
            ],
            "targets": [
                {"name": t.name, "value": rnd(t.value), "target": t.target, "status": t.status, "detail": t.detail}
                for t in self.targets
            ],
        }


def targets(decode: Sequence[DecodeRow], overhead: Sequence[OverheadRow]) -> list[TargetCheck]:
    """The targets of the command, from its rows (a missing row gives a ``NOT MEASURED`` target)."""
    rows = {r.key: r for r in decode}
    out: list[TargetCheck] = []
    ours = rows.get("llamacpp")
    for key, name, peer in (
        ("bare", "llamacpp / bare create_completion", "bare llama-cpp-python"),
        ("llama-server", "llamacpp / llama-server", "llama-server"),
    ):
        theirs = rows.get(key)
        value = (
            paired_ratio(ours.rates(), theirs.rates())
            if ours is not None and ours.measured and theirs is not None and theirs.measured
            else None
        )
        if value is None:
            why = theirs.note if theirs is not None and theirs.note else f"{peer} was not measured"
            out.append(TargetCheck(name, None, f">= {DECODE_TARGET:.2f}", None, why))
            continue
        assert ours is not None and theirs is not None
        detail = (
            f"median of {min(len(ours.samples), len(theirs.samples))} per-round ratios; "
            f"medians {ours.tokens_per_s:.1f} vs {theirs.tokens_per_s:.1f} tok/s"
        )
        if ours.cpu_ms_per_token is not None and theirs.cpu_ms_per_token is not None:
            detail += f"; CPU {ours.cpu_ms_per_token:.2f} vs {theirs.cpu_ms_per_token:.2f} ms/token"
        out.append(TargetCheck(name, value, f">= {DECODE_TARGET:.2f}", value >= DECODE_TARGET, detail))
    loop = next((o for o in overhead if o.backend == "llamacpp"), None)
    if loop is None or loop.share is None:
        out.append(TargetCheck("agent loop overhead / wall", None, f"<= {OVERHEAD_TARGET:.0%}", None, "not measured"))
    else:
        detail = (
            f"{loop.runs} run(s) of {loop.task}, {loop.turns} turn(s), "
            f"{loop.overhead_s * 1000:.1f} ms of {loop.wall_s:.1f} s"
        )
        out.append(
            TargetCheck(
                "agent loop overhead / wall",
                loop.share,
                f"<= {OVERHEAD_TARGET:.0%}",
                loop.share <= OVERHEAD_TARGET,
                detail,
            )
        )
    return out


# --- measuring -----------------------------------------------------------------------------------


def decode_request(max_tokens: int, seed: int) -> ChatRequest:
    """The chat request of the decode rows: no tools, greedy, a fixed budget."""
    return ChatRequest(
        messages=[{"role": "user", "content": DECODE_PROMPT}], max_tokens=max_tokens, temperature=0.0, seed=seed
    )


async def _backend_sample(backend: Backend, request: ChatRequest) -> DecodeSample:
    first: float | None = None
    cpu_first = 0.0
    tokens = 0
    finish: Finish | None = None
    async for event in backend.stream(request):
        if isinstance(event, ContentDelta) and first is None and event.text:
            first = event.t
            cpu_first = time.process_time()
        elif isinstance(event, Usage):
            tokens = event.completion_tokens
        elif isinstance(event, Finish):
            finish = event
    cpu = time.process_time() - cpu_first
    if first is None or finish is None:
        return DecodeSample(tokens=tokens, seconds=0.0, finish=finish.reason if finish else None)
    return DecodeSample(tokens=tokens, seconds=finish.t - first, cpu_seconds=cpu, finish=finish.reason)


def backend_sample(backend: Backend, request: ChatRequest) -> DecodeSample:
    """Time one streamed turn of ``backend``: completion tokens from ``Usage``, first content token to ``Finish``."""
    return asyncio.run(_backend_sample(backend, request))


def bare_sample(llm: Any, prompt: str, *, max_tokens: int, seed: int) -> DecodeSample:
    """Time ``llm.create_completion(prompt, stream=True)`` with the backend's sampling settings.

    Each streamed chunk before the last carries one token; a ``length`` finish means exactly
    ``max_tokens`` tokens.
    """
    first: float | None = None
    cpu_first = 0.0
    chunks = 0
    reason: str | None = None
    stream = llm.create_completion(
        prompt,
        max_tokens=max_tokens,
        temperature=0.0,
        top_k=40,
        top_p=0.95,
        min_p=0.05,
        repeat_penalty=1.0,
        seed=seed,
        stream=True,
    )
    for chunk in stream:
        if first is None:
            first = time.monotonic()
            cpu_first = time.process_time()
        choice = chunk["choices"][0]
        reason = choice.get("finish_reason")
        if reason is None:
            chunks += 1
    end = time.monotonic()
    cpu = time.process_time() - cpu_first
    tokens = max_tokens if reason == "length" else chunks
    return DecodeSample(tokens=tokens, seconds=end - first if first else 0.0, cpu_seconds=cpu, finish=reason)


def find_llama_server(
    explicit: str | Path | None = None,
    *,
    which: Callable[[str], str | None] = shutil.which,
    home: Path = LLAMA_SERVER_HOME,
) -> Path | None:
    """The ``llama-server`` binary to compare against: ``explicit``, else one on PATH, else the built one.

    Raises:
        ConfigError: ``explicit`` was given but is not an executable file.
    """
    from tooldispatch.errors import ConfigError

    if explicit is not None:
        path = Path(explicit).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise ConfigError(
                f"--llama-server {path} is not an executable file; build one with scripts/build-llama-server.sh"
            )
        return path
    found = which("llama-server")
    if found:
        return Path(found)
    return home if home.is_file() and os.access(home, os.X_OK) else None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _post(url: str, body: Mapping[str, Any], timeout: float) -> dict[str, Any]:
    data = json.dumps(body).encode("utf-8")
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as response:
        result: dict[str, Any] = json.loads(response.read())
    return result


class LlamaServer:
    """A ``llama-server`` process on 127.0.0.1, started for the benchmark and stopped after it (a context manager).

    Args:
        binary: the ``llama-server`` executable.
        model_path: the GGUF file.
        threads: ``-t`` and ``-tb``.
        n_ctx: ``-c`` (one slot, so the slot gets all of it).
        startup_s: how long to wait for ``/health``.
    """

    def __init__(self, binary: Path, model_path: Path, *, threads: int, n_ctx: int, startup_s: float = 180.0) -> None:
        self.binary = binary
        self.model_path = model_path
        self.threads = threads
        self.n_ctx = n_ctx
        self.startup_s = startup_s
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the server; closed in stop())

    def command(self, port: int) -> list[str]:
        """The command line; flash attention off as in ``llama_cpp.Llama``'s default."""
        t = str(self.threads)
        return [
            str(self.binary), "-m", str(self.model_path), "--host", "127.0.0.1", "--port", str(port),
            "-t", t, "-tb", t, "-c", str(self.n_ctx), "-np", "1", "-fa", "off", "--no-webui",
        ]  # fmt: skip

    def __enter__(self) -> LlamaServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _log_tail(self) -> str:
        self._log.seek(0)
        lines = self._log.read().decode("utf-8", "replace").strip().splitlines()
        return "\n".join(lines[-8:])

    def start(self) -> None:
        """Start the server and wait until ``/health`` answers 200.

        Raises:
            BackendUnavailable: the process exited or did not become healthy in time (with its log's tail).
        """
        self.port = _free_port()
        self._proc = subprocess.Popen(self.command(self.port), stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.startup_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                message = f"llama-server exited with {self._proc.returncode}:\n{self._log_tail()}"
                self.stop()
                raise BackendUnavailable(message)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.25)
        message = f"llama-server did not answer /health within {self.startup_s:.0f} s:\n{self._log_tail()}"
        self.stop()
        raise BackendUnavailable(message)

    def stop(self) -> None:
        """Stop the server (terminate, then kill after 10 s)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None
        self._log.close()

    def sample(self, prompt: str, *, max_tokens: int, seed: int) -> DecodeSample:
        """One ``/completion`` with the backend's sampling settings; the server's own decode timings.

        The prompt stays cached between requests (as in-process), so the process CPU time read from
        ``/proc`` around the request is nearly all decoding: it is divided over every generated token.
        """
        body = {
            "prompt": prompt,
            "n_predict": max_tokens,
            "temperature": 0.0,
            "top_k": 40,
            "top_p": 0.95,
            "min_p": 0.05,
            "repeat_penalty": 1.0,
            "seed": seed,
            "cache_prompt": True,
            "stream": False,
        }
        cpu_before = self.cpu_seconds()
        answer = _post(f"http://127.0.0.1:{self.port}/completion", body, timeout=600)
        cpu_after = self.cpu_seconds()
        timings = answer.get("timings") or {}
        reason = "length" if answer.get("stop_type") == "limit" else answer.get("stop_type")
        return DecodeSample(
            tokens=int(timings.get("predicted_n", 0)),
            seconds=float(timings.get("predicted_ms", 0.0)) / 1000,
            cpu_seconds=cpu_after - cpu_before if cpu_before is not None and cpu_after is not None else None,
            cpu_steps=int(timings.get("predicted_n", 0)),
            finish=str(reason) if reason is not None else None,
        )

    def cpu_seconds(self) -> float | None:
        """The server process's user + system CPU seconds so far (``None`` where ``/proc`` is missing)."""
        if self._proc is None:
            return None
        try:
            fields = Path(f"/proc/{self._proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --- the agent loop's overhead ---------------------------------------------------------------------


def _call(name: str, arguments: Mapping[str, Any]) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": dict(arguments)}) + "\n</tool_call>"


def scripted_turns() -> list[Any]:
    """The assign-north task done right in five turns (hermes ``<tool_call>`` blocks), for the scripted backend."""
    from tooldispatch.backends.scripted import ScriptedTurn

    return [
        ScriptedTurn(content=_call("refresh_drivers", {"zone": "north"})),
        ScriptedTurn(content=_call("list_drivers", {"zone": "north"})),
        ScriptedTurn(content=_call("assign_driver", {"driver_id": "d-north-1", "order_id": "o-101"})),
        ScriptedTurn(
            content=_call("send_message", {"to": "c-101", "subject": "o-101", "body": "A driver is on the way."})
        ),
        ScriptedTurn(content="Driver d-north-1 is assigned to o-101 and the customer has been told."),
    ]


def agent_overhead(
    make_backend: Callable[[], Backend],
    *,
    backend: str,
    task_id: str,
    runs: int,
    max_tokens: int,
    max_turns: int = 5,
    constrained: bool = False,
) -> OverheadRow:
    """Run the ``Agent`` ``runs`` times on a fresh demo world and sum its clocks.

    Raises:
        ConfigError: no demo task has ``task_id``.
    """
    from tooldispatch.agent import Agent, Budget
    from tooldispatch.agent.loop import GENERIC_SYSTEM
    from tooldispatch.dispatch import Dispatcher
    from tooldispatch.errors import ConfigError
    from tooldispatch.tools.demo import DemoWorld, build_registry, demo_tasks

    tasks = {t.id: t for t in demo_tasks()}
    if task_id not in tasks:
        raise ConfigError(f"no demo task {task_id!r}; choose one of: {', '.join(tasks)}")
    task = tasks[task_id]
    turns = 0
    wall = overhead = 0.0
    shares: list[float] = []
    ends: list[str] = []
    for _ in range(runs):
        world = DemoWorld.seed()
        try:
            if task.setup is not None:
                task.setup(world)
            with Dispatcher(build_registry(world), store=":memory:") as dispatcher:
                agent = Agent(
                    backend=make_backend(),
                    dispatcher=dispatcher,
                    max_tokens=max_tokens,
                    budget=Budget(max_turns=max_turns),
                    constrained=constrained,
                    # Constrained runs measure the loop with a call on every turn.
                    tool_choice="required" if constrained else "auto",
                    system_prompt=GENERIC_SYSTEM,
                )
                result = agent.run(task.prompt)
        finally:
            world.close()
        turns += len(result.turns)
        wall += result.wall_s
        overhead += result.overhead_s
        shares.append(result.overhead_s / result.wall_s if result.wall_s > 0 else 0.0)
        ends.append(result.end)
    return OverheadRow(backend, task_id, runs, turns, wall, overhead, tuple(shares), tuple(ends))


# --- the whole command -----------------------------------------------------------------------------


def run(
    *,
    model: str,
    threads: int,
    n_ctx: int,
    seed: int,
    max_tokens: int,
    rounds: int,
    agent_runs: int,
    scripted_runs: int,
    task_id: str,
    llama_server: Path | None,
    agent_constrained: bool = False,
    progress: Callable[[str], None] = lambda _msg: None,
) -> BackendReport:
    """Measure every row in one process, in ABBA order, and return the report.

    Raises:
        ModelNotFoundError: the model file is missing or corrupt (the message names the pull command).
        BackendUnavailable: llama-cpp-python is missing, or llama-server failed to start.
    """
    from tooldispatch.backends.llamacpp import LlamaCppBackend
    from tooldispatch.backends.scripted import ScriptedBackend
    from tooldispatch.models import resolve

    load_before = os.getloadavg()
    path = resolve(model)
    progress(f"loading {model} twice (backend and bare Llama), {threads} thread(s)")
    backend = LlamaCppBackend(model, n_threads=threads, n_ctx=n_ctx, seed=seed)
    import llama_cpp  # present: the backend loaded

    bare = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, n_threads=threads, seed=seed, verbose=False)
    request = decode_request(max_tokens, seed)
    prompt = backend.render(request)
    settings = Settings(
        model=model,
        model_path=str(path),
        threads=threads,
        n_ctx=n_ctx,
        seed=seed,
        max_tokens=max_tokens,
        rounds=rounds,
        agent_runs=agent_runs,
        scripted_runs=scripted_runs,
        task=task_id,
        agent_constrained=agent_constrained,
        prompt_tokens=len(bare.tokenize(prompt.encode("utf-8"), special=True)),
    )
    samplers: dict[str, Callable[[], DecodeSample]] = {
        "llamacpp": lambda: backend_sample(backend, request),
        "bare": lambda: bare_sample(bare, prompt, max_tokens=max_tokens, seed=seed),
    }
    server_note = NO_SERVER_NOTE
    if llama_server is not None:
        progress(f"starting {llama_server} on 127.0.0.1")
    maybe_server = LlamaServer(llama_server, path, threads=threads, n_ctx=n_ctx) if llama_server else nullcontext(None)
    with maybe_server as server:
        if server is not None:
            samplers["llama-server"] = lambda: server.sample(prompt, max_tokens=max_tokens, seed=seed)
            server_note = f"{server.binary}"
        samples: dict[str, list[DecodeSample]] = {key: [] for key in samplers}
        for key, sampler in samplers.items():
            progress(f"warm-up: {key}")
            sampler()
        order = schedule(list(samplers), rounds)
        for i, key in enumerate(order, 1):
            progress(f"decode {i}/{len(order)}: {key}")
            samples[key].append(samplers[key]())
    decode = (
        DecodeRow("llamacpp", "llamacpp backend (LlamaCppBackend.stream)", tuple(samples["llamacpp"])),
        DecodeRow("bare", "bare Llama.create_completion(stream=True)", tuple(samples["bare"])),
        DecodeRow(
            "llama-server",
            "llama-server /completion (timings.predicted_per_second)",
            tuple(samples.get("llama-server", ())),
            note=server_note,
        ),
    )
    bare.close()
    progress(f"agent loop: {agent_runs} run(s) of {task_id} on llamacpp")
    ours = agent_overhead(
        lambda: backend,
        backend="llamacpp",
        task_id=task_id,
        runs=agent_runs,
        max_tokens=max_tokens,
        constrained=agent_constrained,
    )
    progress(f"agent loop: {scripted_runs} run(s) of assign-north on the scripted backend")
    scripted = agent_overhead(
        lambda: ScriptedBackend(scripted_turns()),
        backend="scripted",
        task_id="assign-north",
        runs=scripted_runs,
        max_tokens=max_tokens,
    )
    backend.close()
    return BackendReport(
        settings=settings,
        decode=decode,
        overhead=(ours, scripted),
        load_before=load_before,
        load_after=os.getloadavg(),
        cpus=len(os.sched_getaffinity(0)),
    )
