"""The replay corpus: every raw model output of a benchmark run, one JSON object per line.

A record holds what is needed to score the output again without the model: the case (functions and
accepted answers), the raw text and native calls exactly as the engine returned them, the finish reason,
and where it came from (model, quantization with the file's real tensor types, engine and version,
provider and cost for hosted routes), plus token counts and timings.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CORPUS_SCHEMA = 1
CORPUS_NAME = "corpus.jsonl"
"""The corpus's file name in a run folder."""


@dataclass(frozen=True, slots=True)
class Cell:
    """One column of the benchmark matrix.

    Attributes:
        backend: ``llamacpp``, ``openai`` or ``openrouter``.
        model: the model name (``smollm2-135m-instruct``, ``qwen/qwen3-32b``).
        quant: the quantization label (``Q4_1``; ``fp8`` for a pinned OpenRouter route).
        parse_mode: ``client`` (raw text parsed by tooldispatch) or ``server`` (the server's ``tool_calls``).
        constrained: decoding constrained to the tool-call grammar.
        tool_choice: for constrained cells, ``auto`` (the model may answer; a call it starts follows the
            grammar) or ``required`` (every output is a call).
        cut: the runtime's variant (``bench.cuts.CUTS``): ``full``, or the part switched off.
    """

    backend: str
    model: str
    quant: str
    parse_mode: str = "client"
    constrained: bool = False
    tool_choice: str = "auto"
    cut: str = "full"

    @property
    def mode(self) -> str:
        """``free``, ``constrained`` (tool_choice auto) or ``constrained-required``."""
        if not self.constrained:
            return "free"
        return "constrained" if self.tool_choice == "auto" else f"constrained-{self.tool_choice}"

    @property
    def key(self) -> str:
        """A stable text key (``llamacpp|smollm2-135m-instruct@Q4_1|client|free``, ``…|free|no-repair`` for a cut)."""
        key = f"{self.backend}|{self.model}@{self.quant}|{self.parse_mode}|{self.mode}"
        return key if self.cut == "full" else f"{key}|{self.cut}"

    @property
    def label(self) -> str:
        """A short label for charts (``smollm2-135m-instruct@Q4_1``, with mode suffixes when not default)."""
        constrained = self.mode.replace("-", ", ") if self.constrained else ""
        cut = self.cut if self.cut != "full" else ""
        extra = [m for m in (self.parse_mode if self.parse_mode != "client" else "", constrained, cut)]
        suffix = "".join(f" [{e}]" for e in extra if e)
        return f"{self.model}@{self.quant}{suffix}"

    @classmethod
    def from_key(cls, key: str) -> Cell:
        """Parse a ``key`` back into a cell."""
        backend, model_quant, parse_mode, mode, *cut = key.split("|")
        model, _, quant = model_quant.rpartition("@")
        constrained, _, choice = mode.partition("-")
        return cls(
            backend=backend,
            model=model,
            quant=quant,
            parse_mode=parse_mode,
            constrained=constrained == "constrained",
            tool_choice=choice or "auto",
            cut=cut[0] if cut else "full",
        )


@dataclass(slots=True)
class OutputRecord:
    """One raw model output with its provenance.

    Attributes:
        cell: the matrix cell key (``Cell.key``).
        case_id: the case (``simple_python_0``, ``suite:reroute_truck``).
        seed: sampling seed.
        case: the case data needed to score it again (``BfclCase.to_dict()`` or a suite task).
        model: the model name.
        quant: the quantization label.
        tensor_types: the model file's real tensor types, ``{type: count}`` (empty for hosted models).
        model_file: the file name of the weights, when local.
        engine: ``llama.cpp``, ``vllm``, ``openrouter``...
        engine_version: the engine's version, when known.
        backend: the backend name.
        parse_mode: ``client`` or ``server``.
        constrained: decoding was constrained.
        prompt_id: a hash of the messages and tools sent (equal across quantizations of one model).
        text: the visible output text, exactly as returned.
        reasoning: the reasoning text, when the engine split it off.
        native_calls: server-extracted calls, ``{"id", "name", "arguments"}`` with arguments as a string.
        finish_reason: why generation stopped.
        prompt_tokens: prompt tokens reported by the engine.
        completion_tokens: completion tokens reported by the engine.
        latency_s: seconds from request to finish.
        first_token_s: seconds from request to the first event.
        provider: the provider that served it (OpenRouter), when known.
        cost: the cost of the request in USD, when the provider reported it.
        error: the error message when the request failed for good (no output).
        extra: suite-specific results (final-state checks).
    """

    cell: str
    case_id: str
    seed: int
    case: Mapping[str, Any]
    model: str
    quant: str
    tensor_types: Mapping[str, int] = field(default_factory=dict)
    model_file: str = ""
    engine: str = ""
    engine_version: str = ""
    backend: str = ""
    parse_mode: str = "client"
    constrained: bool = False
    prompt_id: str = ""
    text: str = ""
    reasoning: str = ""
    native_calls: Sequence[Mapping[str, Any]] = ()
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    first_token_s: float | None = None
    provider: str | None = None
    cost: float | None = None
    error: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form written to the corpus."""
        data = asdict(self)
        data["native_calls"] = [dict(c) for c in self.native_calls]
        return {"schema": CORPUS_SCHEMA, **data}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> OutputRecord:
        """Rebuild a record from its JSON form (unknown keys are ignored)."""
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})

    @property
    def decode_tokens_per_s(self) -> float | None:
        """Completion tokens per second after the first token, when both are known."""
        if self.first_token_s is None or self.completion_tokens <= 1:
            return None
        span = self.latency_s - self.first_token_s
        return (self.completion_tokens - 1) / span if span > 0 else None


def prompt_id(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]], family: str) -> str:
    """A short stable hash of what a model family is sent for one case."""
    blob = json.dumps({"m": list(messages), "t": list(tools), "f": family}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def write_corpus(path: Path, records: Iterable[OutputRecord]) -> int:
    """Write records as JSONL (replacing the file); return how many were written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for record in records:
            fh.write(json.dumps(record.to_dict(), ensure_ascii=False, sort_keys=True) + "\n")
            count += 1
    tmp.replace(path)
    return count


def read_corpus(path: Path) -> Iterator[OutputRecord]:
    """Read a JSONL corpus written by ``write_corpus``.

    Raises:
        ConfigError: the file cannot be read, or a line is not one output record (the message names the line).
    """
    from tooldispatch.errors import ConfigError

    fix = "pass the corpus.jsonl a benchmark run writes (RUN_DIR/corpus.jsonl)"
    try:
        with path.open(encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    data = json.loads(line)
                except ValueError as exc:
                    raise ConfigError(f"{path} line {number} is not JSON ({exc}); {fix}") from None
                if not isinstance(data, dict):
                    raise ConfigError(f"{path} line {number} is not a JSON object; {fix}")
                try:
                    yield OutputRecord.from_dict(data)
                except (TypeError, KeyError, ValueError, AttributeError) as exc:
                    raise ConfigError(f"{path} line {number} is not a benchmark output record ({exc}); {fix}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path} is not a text file; {fix}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}; {fix}") from None
