"""``tooldispatch bench parser``: recovery and speed of the parser on the labelled raw-output corpus.

Everything is measured side by side in one run, on the same inputs:

* **Recovery** per stage (strict only, + fallback, + repair; counted from each accepted call's bucket)
  and per bucket, next to two peers: a ``json.loads``-only strict baseline (``<tool_call>`` bodies, or
  the whole text, decoded with ``json.loads``) and ``json_repair`` (the peer for lenient JSON) on the
  same bodies. A call counts when its name and arguments equal the hand label exactly.
* **Speed**: time per expected call and MB/s of each method on the well-formed inputs (every payload is
  valid JSON and the strict baseline recovers exactly the labelled calls) and on the malformed ones (the
  other outputs with calls).
* **Ratios** against the targets: the strict path at most 3x bare ``json.loads`` of the same payloads;
  the full cascade at least 3x faster than ``json_repair`` on malformed inputs while recovering at least
  as many calls exactly; a 100 KB output fed to ``StreamParser`` one character at a time at most 3x
  parsing it whole. Beside the stream figure: the same consumer loop against a ``feed`` that does
  nothing, the floor of any parser called once per character.
* **Payload-size sweep**: one hermes call whose argument is a string of 0.1, 1, 10 and 100 KB, well-formed
  (``parse_tool_calls`` against bare ``json.loads`` of its payload) and malformed (single quotes and
  trailing commas: the cascade against ``json_repair.loads`` of the payload). It shows where the fixed
  cost per call stops dominating; the corpus ratios stay the targets' figures.
"""

from __future__ import annotations

import functools
import json
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from tooldispatch.errors import ConfigError
from tooldispatch.policy import ToolPolicy
from tooldispatch.repair import repair_call
from tooldispatch.toolspec import ToolSpec, normalize_tools
from tooldispatch.types import ACCEPTED_BUCKETS, ParseOutcome, canonical_arguments

CORPUS_DIR = Path("tests/fixtures/corpus")
"""Where the labelled corpus lives in a checkout (the command runs from the repository root)."""

CallKey = tuple[str, str]
"""A call as compared with a label: the name and the arguments as canonical JSON."""

STAGES: tuple[tuple[str, frozenset[str]], ...] = (
    ("strict only", frozenset({"ok_strict"})),
    ("+ fallback", frozenset({"ok_strict", "ok_fallback"})),
    ("+ repair", frozenset(ACCEPTED_BUCKETS)),
)
STREAM_BYTES = 100_000


@dataclass(frozen=True, slots=True)
class Record:
    """One labelled raw output of the corpus."""

    id: str
    format: str
    tools_ref: str
    text: str
    tools: Mapping[str, ToolSpec]
    expected: tuple[CallKey, ...]
    finish_reason: str | None = None
    reasoning_open: bool = False
    native_calls: list[dict[str, Any]] | None = None


def call_key(name: str, arguments: Any) -> CallKey:
    """Return the comparable form of a call: its name and its canonical arguments (``types.call_key``'s parts)."""
    return name, canonical_arguments(arguments)


def load_corpus(directory: Path) -> list[Record]:
    """Read every ``*.jsonl`` file of the corpus, resolving ``tools_ref`` through ``tools.json``.

    Raises:
        ConfigError: the directory, ``tools.json`` or a record is missing or malformed (the message names it).
    """
    files = sorted(directory.glob("*.jsonl"))
    if not files:
        raise ConfigError(f"no *.jsonl corpus files under {directory}; run from the repository root or pass --corpus")
    tool_sets: dict[str, Any] = {}
    tools_file = directory / "tools.json"
    if tools_file.is_file():
        tool_sets = json.loads(tools_file.read_text(encoding="utf-8"))
    normalized: dict[str, Mapping[str, ToolSpec]] = {}
    records: list[Record] = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            where = f"{path.name}:{number}"
            try:
                raw = json.loads(line)
                ref = str(raw.get("tools_ref", ""))
                tools: Mapping[str, ToolSpec]
                if "tools" in raw:
                    tools = _declared(raw["tools"])
                else:
                    if ref not in tool_sets:
                        raise ConfigError(f"{where}: tools_ref {ref!r} is not in {tools_file}")
                    if ref not in normalized:
                        normalized[ref] = _declared(tool_sets[ref])
                    tools = normalized[ref]
                records.append(
                    Record(
                        id=str(raw["id"]),
                        format=str(raw.get("format", "")),
                        tools_ref=ref,
                        text=str(raw["text"]),
                        tools=tools,
                        expected=tuple(call_key(c["name"], c.get("arguments", {})) for c in raw["expected_calls"]),
                        finish_reason=raw.get("finish_reason"),
                        reasoning_open=bool(raw.get("reasoning_open", False)),
                        native_calls=raw.get("native_calls"),
                    )
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise ConfigError(f"{where}: malformed corpus record ({exc!r})") from exc
    return records


# -- the peers ---------------------------------------------------------------------------------------

_HERMES_BODY = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


def payloads(text: str) -> list[str]:
    """Return the JSON bodies a plain strict parser would decode: ``<tool_call>`` bodies, else the text."""
    return _HERMES_BODY.findall(text) or [text]


def _calls_in(value: Any) -> list[CallKey]:
    items = value if isinstance(value, list) else [value]
    calls: list[CallKey] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        args = item.get("arguments", item.get("parameters", {}))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except ValueError:
                continue
        if isinstance(args, dict):
            calls.append(call_key(item["name"], args))
    return calls


def baseline_calls(text: str) -> list[CallKey]:
    """The ``json.loads``-only strict baseline: decode each body, keep ``{name, arguments}`` objects."""
    calls: list[CallKey] = []
    for body in payloads(text):
        try:
            calls.extend(_calls_in(json.loads(body)))
        except (ValueError, RecursionError):
            continue
    return calls


def json_repair_calls(text: str) -> list[CallKey]:
    """The lenient-JSON peer: the same bodies decoded with ``json_repair.loads``."""
    import json_repair

    calls: list[CallKey] = []
    for body in payloads(text):
        calls.extend(_calls_in(json_repair.loads(body)))
    return calls


# -- tooldispatch ------------------------------------------------------------------------------------


def parse(record: Record) -> ParseOutcome:
    """Parse one record with the full cascade and the default ``bounded`` repair."""
    from tooldispatch.parsing.core import parse_tool_calls

    return parse_tool_calls(
        record.text,
        record.tools,
        native_calls=record.native_calls,
        finish_reason=record.finish_reason,
        reasoning_open=record.reasoning_open,
    )


def accepted_calls(outcome: ParseOutcome, buckets: frozenset[str]) -> list[CallKey]:
    """Return the calls of an outcome whose bucket is in ``buckets``."""
    return [call_key(c.name, c.arguments) for c in outcome.calls if c.bucket in buckets]


def deltas(text: str, step: int = 1) -> list[str]:
    """Split ``text`` into the deltas a server would stream, ``step`` characters each."""
    return [text[start : start + step] for start in range(0, len(text), step)]


class _Consumable(Protocol):
    def feed(self, delta: str) -> Sequence[object]: ...

    def close(self) -> Sequence[object]: ...


def _consume(parser: _Consumable, pieces: Sequence[str], counted: type) -> int:
    """Feed the deltas as a consumer would; return how many events of type ``counted`` came back."""
    feed = parser.feed
    calls = 0
    for piece in pieces:
        for event in feed(piece):
            if event.__class__ is counted:
                calls += 1
    for event in parser.close():
        if event.__class__ is counted:
            calls += 1
    return calls


def stream_parse(pieces: Sequence[str], tools: Mapping[str, ToolSpec]) -> int:
    """Feed the deltas to a ``StreamParser`` as a consumer would; return how many calls it reported."""
    from tooldispatch.parsing.stream import CallReady, StreamParser

    return _consume(StreamParser(tools), pieces, CallReady)


class _IdleParser:
    """A stream consumer's floor: ``feed`` and ``close`` that do nothing but return no events."""

    def feed(self, delta: str) -> tuple[object, ...]:
        return ()

    def close(self) -> tuple[object, ...]:
        return ()


def idle_stream(pieces: Sequence[str]) -> int:
    """Run the consumer loop of :func:`stream_parse` against a parser that does nothing (the floor of any parser)."""
    return _consume(_IdleParser(), pieces, _IdleParser)


# -- scoring -----------------------------------------------------------------------------------------


@dataclass(slots=True)
class Recovery:
    """How many labelled calls one method recovered.

    Attributes:
        label: the method.
        expected: labelled calls in the set.
        exact: labelled calls recovered with the exact name and arguments.
        wrong: calls returned that match no label (wrong arguments, invented calls, false positives).
        records: records in the set.
        records_right: records whose calls were all exactly right, with nothing extra.
    """

    label: str
    expected: int = 0
    exact: int = 0
    wrong: int = 0
    records: int = 0
    records_right: int = 0

    def add(self, expected: Sequence[CallKey], got: Sequence[CallKey]) -> None:
        """Score one record."""
        matched = sum((Counter(expected) & Counter(got)).values())
        self.expected += len(expected)
        self.exact += matched
        self.wrong += len(got) - matched
        self.records += 1
        self.records_right += int(matched == len(expected) == len(got))


@dataclass(slots=True)
class Timing:
    """One method's time over one input set.

    Attributes:
        label: the method.
        inputs: records timed.
        size: bytes of text per pass.
        calls: labelled calls in the set.
        exact: labelled calls the method recovered exactly (-1 for reference timings that parse nothing).
        seconds: the median pass over the set.
    """

    label: str
    inputs: int
    size: int
    calls: int
    exact: int
    seconds: float

    @property
    def us_per_call(self) -> float:
        """Microseconds per labelled call."""
        return self.seconds / max(self.calls, 1) * 1e6

    @property
    def mb_per_s(self) -> float:
        """Megabytes of raw output per second."""
        return self.size / 1e6 / self.seconds if self.seconds > 0 else float("inf")


@dataclass(frozen=True, slots=True)
class Ratio:
    """A measured ratio against its target."""

    name: str
    value: float
    target: str
    met: bool
    detail: str = ""


@dataclass(frozen=True, slots=True)
class SweepRow:
    """One payload size of the sweep: median seconds per output of each method.

    Attributes:
        kb: the size of the argument string, in kilobytes.
        payload: bytes of the well-formed JSON payload.
        loads: bare ``json.loads`` of the well-formed payload.
        parse: ``parse_tool_calls`` of the well-formed output.
        peer: ``json_repair.loads`` of the malformed payload.
        cascade: ``parse_tool_calls`` of the malformed output.
        exact: whether the cascade and the peer recovered the malformed call exactly.
    """

    kb: float
    payload: int
    loads: float
    parse: float
    peer: float
    cascade: float
    exact: tuple[bool, bool]


@dataclass(slots=True)
class Report:
    """Everything ``bench parser`` measured in one run."""

    records: int
    build: str = ""
    recovery: list[Recovery] = field(default_factory=list)
    buckets: Counter[str] = field(default_factory=Counter)
    formats: dict[str, Recovery] = field(default_factory=dict)
    timings: dict[str, list[Timing]] = field(default_factory=dict)
    ratios: list[Ratio] = field(default_factory=list)
    sweep: list[SweepRow] = field(default_factory=list)
    slowest: list[tuple[str, float]] = field(default_factory=list)


_clock = time.process_time


def _best(passes: Sequence[Callable[[], object]], rounds: int, *, min_seconds: float = 0.005) -> list[float]:
    """Return each pass's median time over ``rounds`` rounds, the passes interleaved within a round.

    Times are the CPU time of this process (every pass is single-threaded), so other work on a shared
    machine moves them less than wall time; interleaving exposes every method to the same load, and the
    median (not the minimum) keeps one lucky or unlucky round from deciding a ratio. A pass quicker than
    ``min_seconds`` is repeated within one timing (and the time divided), so that the clock's resolution
    does not decide small figures.
    """
    repeats = []
    for run in passes:
        start = _clock()
        run()
        once = max(_clock() - start, 1e-7)
        repeats.append(max(1, int(min_seconds / once)))
    samples: list[list[float]] = [[] for _ in passes]
    for _ in range(rounds):
        for i, run in enumerate(passes):
            start = _clock()
            for _ in range(repeats[i]):
                run()
            samples[i].append((_clock() - start) / repeats[i])
    return [statistics.median(times) for times in samples]


def _pass(fn: Callable[[Record], object], records: Sequence[Record]) -> Callable[[], object]:
    def run() -> None:
        for record in records:
            fn(record)

    return run


def _exact(records: Iterable[Record], fn: Callable[[Record], list[CallKey]]) -> int:
    total = 0
    for record in records:
        total += sum((Counter(record.expected) & Counter(fn(record))).values())
    return total


def stream_text(records: Sequence[Record], size: int = STREAM_BYTES) -> tuple[str, Mapping[str, ToolSpec]]:
    """Build an output of at least ``size`` characters from well-formed records sharing one tool set.

    Calls alternate with paragraphs of prose, the way a long answer interleaves text and calls.
    """
    by_ref = Counter(r.tools_ref for r in records)
    ref = by_ref.most_common(1)[0][0]
    chosen = [r for r in records if r.tools_ref == ref]
    prose = (
        "Checking the next item in the list before deciding which tool to call; nothing here is a call, "
        "only the running commentary a model writes between calls.\n"
    )
    parts: list[str] = []
    length = 0
    i = 0
    while length < size:
        piece = prose + chosen[i % len(chosen)].text + "\n"
        parts.append(piece)
        length += len(piece)
        i += 1
    return "".join(parts), chosen[0].tools


def run(directory: Path = CORPUS_DIR, *, rounds: int = 20) -> Report:
    """Measure recovery and speed on the corpus under ``directory``.

    Args:
        directory: the corpus (``*.jsonl`` records and ``tools.json``).
        rounds: timing passes per method; the median pass is kept.

    Returns:
        The report; render it with ``tooldispatch.cli.parser_bench``.
    """
    records = load_corpus(directory)
    report = Report(records=len(records), build=build())
    outcomes = {r.id: parse(r) for r in records}
    base = Recovery("json.loads only (strict baseline)")
    peer = Recovery("json_repair (lenient JSON peer)")
    stages = [Recovery(f"tooldispatch: {label}") for label, _ in STAGES]
    for record in records:
        outcome = outcomes[record.id]
        base.add(record.expected, baseline_calls(record.text))
        peer.add(record.expected, json_repair_calls(record.text))
        for recovery, (_, buckets) in zip(stages, STAGES, strict=True):
            recovery.add(record.expected, accepted_calls(outcome, buckets))
        report.buckets.update(c.bucket for c in outcome.candidates)
        fmt = report.formats.setdefault(record.format, Recovery(record.format))
        fmt.add(record.expected, accepted_calls(outcome, frozenset(ACCEPTED_BUCKETS)))
    report.recovery = [base, peer, *stages]

    well_formed = [r for r in records if _well_formed(r)]
    malformed = [r for r in records if r.expected and r not in well_formed]
    report.timings["well-formed"] = _time_set(well_formed, rounds, with_bare=True)
    report.timings["malformed"] = _time_set(malformed, rounds, with_bare=False)
    report.ratios = _ratios(report.timings, well_formed, rounds)
    report.ratios += _against_the_model(records, well_formed)
    report.sweep = sweep(rounds=rounds)
    report.slowest = _slowest(records)
    return report


def build() -> str:
    """Which build of the parser runs: the modules compiled with mypyc (``make compiled``) or the sources."""
    from tooldispatch import _compiled

    if _compiled.compiled("tooldispatch.parsing.core"):
        return f"parser compiled with mypyc ({len(_compiled.extension_modules())} modules)"
    return "parser running from its Python sources (`make compiled` builds the compiled modules)"


def _well_formed(record: Record) -> bool:
    """True when every payload is valid JSON and the strict baseline recovers exactly the labelled calls."""
    if not record.expected or not all(_decodes(body) for body in payloads(record.text)):
        return False
    return sorted(baseline_calls(record.text)) == sorted(record.expected)


def _parse_pass(records: Sequence[Record]) -> Callable[[], object]:
    """One pass of ``parse_tool_calls`` over the records, its arguments bound beforehand.

    The peers' passes loop over ready inputs too, so no method pays for reading a record's fields; only
    the options a record sets are passed, as a caller would.
    """
    from tooldispatch.parsing.core import parse_tool_calls

    bound = [functools.partial(parse_tool_calls, r.text, r.tools, **_options(r)) for r in records]

    def run() -> None:
        for call in bound:
            call()

    return run


def _options(record: Record) -> dict[str, Any]:
    """The record's options that differ from the defaults, as a caller would pass them."""
    options: dict[str, Any] = {}
    if record.native_calls is not None:
        options["native_calls"] = record.native_calls
    if record.finish_reason is not None:
        options["finish_reason"] = record.finish_reason
    if record.reasoning_open:
        options["reasoning_open"] = True
    return options


def _time_set(records: Sequence[Record], rounds: int, *, with_bare: bool) -> list[Timing]:
    if not records:
        return []
    size = sum(len(r.text.encode("utf-8")) for r in records)
    calls = sum(len(r.expected) for r in records)
    bodies = [body for r in records for body in payloads(r.text) if _decodes(body)]

    def bare() -> None:
        for body in bodies:
            json.loads(body)

    decoded = [(r.tools, name, json.loads(args)) for r in records for name, args in r.expected]

    def repair_only() -> None:
        for tools, name, args in decoded:
            repair_call(name, args, tools, level="bounded")

    methods: list[tuple[str, Callable[[], object], int]] = []
    if with_bare:
        # Reference timings, not parsers: they recover nothing by themselves (exact = -1).
        methods.append(("bare json.loads of the payloads", bare, -1))
        methods.append(("repair_call alone on the decoded calls (share of the strict path)", repair_only, -1))
    methods += [
        ("json.loads only (strict baseline)", _pass(lambda r: baseline_calls(r.text), records), 0),
        ("json_repair (lenient JSON peer)", _pass(lambda r: json_repair_calls(r.text), records), 0),
        ("tooldispatch (full cascade)", _parse_pass(records), 0),
    ]
    exact = {
        "json.loads only (strict baseline)": _exact(records, lambda r: baseline_calls(r.text)),
        "json_repair (lenient JSON peer)": _exact(records, lambda r: json_repair_calls(r.text)),
        "tooldispatch (full cascade)": _exact(records, lambda r: accepted_calls(parse(r), frozenset(ACCEPTED_BUCKETS))),
    }
    seconds = _best([m[1] for m in methods], rounds)
    return [
        Timing(label, len(records), size, calls, exact.get(label, fixed), sec)
        for (label, _, fixed), sec in zip(methods, seconds, strict=True)
    ]


def _decodes(body: str) -> bool:
    try:
        json.loads(body)
    except (ValueError, RecursionError):
        return False
    return True


def _find(timings: Sequence[Timing], label: str) -> Timing | None:
    return next((t for t in timings if t.label.startswith(label)), None)


def _ratios(timings: Mapping[str, Sequence[Timing]], well_formed: Sequence[Record], rounds: int) -> list[Ratio]:
    ratios: list[Ratio] = []
    strict = timings.get("well-formed", [])
    bare, ours = _find(strict, "bare json.loads"), _find(strict, "tooldispatch")
    if bare and ours:
        value = ours.seconds / bare.seconds
        ratios.append(
            Ratio("strict path / bare json.loads", value, "<= 3x", value <= 3.0, f"{ours.inputs} well-formed outputs")
        )
    bad = timings.get("malformed", [])
    peer, ours = _find(bad, "json_repair"), _find(bad, "tooldispatch")
    if peer and ours:
        value = peer.seconds / ours.seconds
        enough = ours.exact >= peer.exact
        ratios.append(
            Ratio(
                "json_repair / full cascade, malformed",
                value,
                ">= 3x faster, >= as many exact",
                value >= 3.0 and enough,
                f"exact calls: tooldispatch {ours.exact} vs json_repair {peer.exact} of {ours.calls}",
            )
        )
    if well_formed:
        text, tools = stream_text(well_formed)
        pieces = deltas(text)
        whole, streamed, floor = _best(
            [lambda: _parse_text(text, tools), lambda: stream_parse(pieces, tools), lambda: idle_stream(pieces)],
            min(rounds, 5),
        )
        value = streamed / whole
        ratios.append(
            Ratio(
                "StreamParser 1-char deltas / whole parse",
                value,
                "<= 3x",
                value <= 3.0,
                f"{len(text.encode('utf-8')) / 1000:.0f} KB; whole {whole * 1e3:.1f} ms, "
                f"streamed {streamed * 1e3:.1f} ms; a feed() that does nothing: {floor * 1e3:.1f} ms "
                f"({floor / whole:.2f}x)",
            )
        )
    return ratios


TOKEN_S = 0.002
"""The model's pace the parser is measured against: a token every 2 ms (a local model on a fast GPU)."""
CHARS_PER_TOKEN = 4


def _against_the_model(records: Sequence[Record], well_formed: Sequence[Record]) -> list[Ratio]:
    """The stream's p99 cost per token-sized delta against 1 % of a token's time (20 µs), and the whole parse of
    each output against 1 % of the time the model took to write it (its length at 4 characters a token)."""
    from tooldispatch.parsing.stream import StreamParser

    out: list[Ratio] = []
    if well_formed:
        text, tools = stream_text(well_formed)
        samples: list[int] = []
        clock = time.perf_counter_ns
        for _ in range(3):
            parser = StreamParser(tools)
            for i in range(0, len(text), CHARS_PER_TOKEN):
                piece = text[i : i + CHARS_PER_TOKEN]
                started = clock()
                parser.feed(piece)
                samples.append(clock() - started)
            parser.close()
        samples.sort()
        p99 = samples[int(0.99 * (len(samples) - 1))] / 1e3
        budget = TOKEN_S * 1e6 / 100
        out.append(
            Ratio(
                "StreamParser p99 per 4-char delta / 1 % of a token's time",
                p99 / budget,
                "<= 1x",
                p99 <= budget,
                f"p99 {p99:.2f} µs against {budget:.0f} µs; p50 {samples[len(samples) // 2] / 1e3:.2f} µs "
                f"({len(samples)} feeds)",
            )
        )
    shares: list[float] = []
    for record in records:
        if record.text:
            taken = min(_time_once(record) for _ in range(3))
            shares.append(taken / (max(1.0, len(record.text) / CHARS_PER_TOKEN) * TOKEN_S))
    if shares:
        shares.sort()
        worst = shares[-1] * 100
        out.append(
            Ratio(
                "whole parse / 1 % of the turn's decode time",
                worst,
                "<= 1x",
                worst <= 1.0,
                f"worst output {worst:.3f} %, median {statistics.median(shares) * 100:.3f} % of the decode time "
                f"at {TOKEN_S * 1e3:.0f} ms a token",
            )
        )
    return out


def _time_once(record: Record) -> float:
    started = time.perf_counter()
    parse(record)
    return time.perf_counter() - started


def _parse_text(text: str, tools: Mapping[str, ToolSpec]) -> ParseOutcome:
    from tooldispatch.parsing.core import parse_tool_calls

    return parse_tool_calls(text, tools)


def _slowest(records: Sequence[Record], count: int = 5) -> list[tuple[str, float]]:
    """Return the records that took longest to parse (microseconds per parse, median of 3)."""
    costs: list[tuple[str, float]] = []
    for record in records:
        (seconds,) = _best([functools.partial(parse, record)], 3, min_seconds=0.001)
        costs.append((f"{record.id} ({record.format})", seconds * 1e6))
    costs.sort(key=lambda item: item[1], reverse=True)
    return costs[:count]


CORPUS_POLICY: Final = ToolPolicy.read_only(why="the labelled corpus's tools, read-only as its labels assume")
"""What the corpus's tools are declared to be: its labels take calls from running text and near-match repairs."""


def _declared(tools: Any) -> Mapping[str, ToolSpec]:
    return {spec.name: spec for spec in CORPUS_POLICY.declare(normalize_tools(tools).values())}


# -- payload-size sweep ------------------------------------------------------------------------------

SWEEP_KB = (0.1, 1.0, 10.0, 100.0)
SWEEP_TOOLS: Mapping[str, ToolSpec] = normalize_tools(
    [
        {
            "name": "write_note",
            "description": "Save a note.",
            "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        }
    ]
)
_FILLER = "Note line with words and numbers 12345, nothing that needs escaping. "


def sweep_outputs(kb: float) -> tuple[str, str, str, str, dict[str, Any]]:
    """One ``write_note`` call whose text is ``kb`` kilobytes, written well and malformed.

    Returns:
        The well-formed output and its payload, the malformed output (single quotes, trailing commas)
        and its payload, and the arguments both stand for.
    """
    size = round(kb * 1000)
    note = (_FILLER * (size // len(_FILLER) + 1))[:size]
    good = json.dumps({"name": "write_note", "arguments": {"text": note}})
    bad = f"{{'name': 'write_note', 'arguments': {{'text': '{note}',}},}}"
    return f"<tool_call>\n{good}\n</tool_call>", good, f"<tool_call>\n{bad}\n</tool_call>", bad, {"text": note}


def sweep(sizes: Sequence[float] = SWEEP_KB, *, rounds: int = 20) -> list[SweepRow]:
    """Time one call per payload size, well-formed and malformed, each method beside its peer.

    Args:
        sizes: argument string sizes in kilobytes.
        rounds: timing rounds (the median is kept).
    """
    import json_repair

    from tooldispatch.parsing.core import parse_tool_calls

    rows: list[SweepRow] = []
    for kb in sizes:
        good, good_payload, bad, bad_payload, arguments = sweep_outputs(kb)
        calls = parse_tool_calls(bad, SWEEP_TOOLS).calls
        ours = len(calls) == 1 and calls[0].name == "write_note" and calls[0].arguments == arguments
        peer = json_repair.loads(bad_payload) == {"name": "write_note", "arguments": arguments}
        loads, parse, repaired, cascade = _best(
            [
                functools.partial(json.loads, good_payload),
                functools.partial(parse_tool_calls, good, SWEEP_TOOLS),
                functools.partial(json_repair.loads, bad_payload),
                functools.partial(parse_tool_calls, bad, SWEEP_TOOLS),
            ],
            rounds,
        )
        rows.append(SweepRow(kb, len(good_payload.encode("utf-8")), loads, parse, repaired, cascade, (ours, peer)))
    return rows
