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

This module measures; the rows, targets and report it fills are ``backend_report``'s.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from tooldispatch.backends.base import Backend, ChatRequest, ContentDelta, Finish, Usage
from tooldispatch.bench.backend_report import (
    BackendReport,
    DecodeRow,
    DecodeSample,
    OverheadRow,
    Settings,
    schedule,
)
from tooldispatch.errors import BackendUnavailable

DECODE_PROMPT = "Write a long story about a dragon who learns to cook. Use at least 500 words."
"""The user message of the decode rows: SmolLM2-135M greedily writes past 256 tokens on it."""

LLAMA_SERVER_HOME = Path.home() / ".cache" / "tooldispatch" / "llama-server" / "bin" / "llama-server"
"""Where ``scripts/build-llama-server.sh`` installs the binary."""

NO_SERVER_NOTE = "not measured: no llama-server binary; build it with scripts/build-llama-server.sh"

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
