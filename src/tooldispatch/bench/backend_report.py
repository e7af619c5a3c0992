"""What ``tooldispatch bench backend`` reports, and how its figures are made from the samples.

The rows (``DecodeRow`` over ``DecodeSample`` rounds, ``OverheadRow``), the targets they are held to, the
settings they were measured with and the whole report (``BackendReport``), with the median and paired-ratio
rules; ``backend`` does the measuring.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

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
