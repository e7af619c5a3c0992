"""Scoring one raw output five ways with the real parser, and the statistics behind every rate."""

from __future__ import annotations

import pytest

from tooldispatch.bench.bfcl_data import BfclCase
from tooldispatch.bench.corpus import Cell, OutputRecord
from tooldispatch.bench.scoring import BUCKETS, json_repair_calls, score_output
from tooldispatch.bench.stats import exact_rate, paired_difference, pass_hat_k, rate
from tooldispatch.bench.summary import summarize_cell
from tooldispatch.types import ACCEPTED_BUCKETS, REJECTED_BUCKETS

FN = {
    "name": "get.weather",
    "description": "Weather for a city.",
    "parameters": {
        "type": "dict",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"],
    },
}
CALL = BfclCase(
    id="simple_python_0",
    category="simple_python",
    messages=({"role": "user", "content": "Weather in Paris?"},),
    functions=(FN,),
    ground_truth=({"get.weather": {"city": ["Paris"], "days": [3, ""]}},),
)
IRRELEVANT = BfclCase(
    id="irrelevance_0",
    category="irrelevance",
    messages=({"role": "user", "content": "Who wrote Hamlet?"},),
    functions=(FN,),
    ground_truth=(),
)
MODES = ("strict", "fallback", "repair", "baseline", "json_repair")


def _record(case: BfclCase, text: str, finish: str = "stop") -> OutputRecord:
    return OutputRecord(
        cell="llamacpp|m@Q4_1|client|free",
        case_id=case.id,
        seed=0,
        case=case.to_dict(),
        model="m",
        quant="Q4_1",
        text=text,
        finish_reason=finish,
        extra={"tool_format": "hermes_list"},
    )


@pytest.mark.parametrize(
    ("text", "bucket", "correct"),
    [
        ('<tool_call>[{"name": "get.weather", "arguments": {"city": "Paris"}}]</tool_call>', "ok_strict", "11111"),
        ("<tool_call>[{'name': 'get.weather', 'arguments': {'city': 'Paris'}}]</tool_call>", "ok_fallback", "01101"),
        ('<tool_call>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_call>', "repaired", "00100"),
        (
            '<tool_call>[{"name": "get.weather", "arguments": {"city": "Paris", "days": "3"}}]</tool_call>',
            "repaired",
            "00100",
        ),
        ('Sure: {"name": "get.weather", "arguments": {"city": "Paris"}}', "ok_fallback", "01101"),
        ("The weather in Paris is nice.", "no_call", "00000"),
    ],
)
def test_each_mode_scores_the_same_raw_output(text: str, bucket: str, correct: str) -> None:
    """strict / +fallback / +repair / serving-stack baseline / json_repair each get the BFCL verdict they earn."""
    scored = score_output(_record(CALL, text))
    assert scored.bucket == bucket
    assert "".join("1" if scored.correct[m] else "0" for m in MODES) == correct


def test_truncated_call_is_its_own_bucket_and_wrong_everywhere() -> None:
    """A call cut off at finish_reason=length lands in Truncated; no parsing mode recovers a right answer."""
    scored = score_output(_record(CALL, '<tool_call>[{"name": "get.weather", "arguments": {"city": "Par', "length"))
    assert scored.bucket == "Truncated"
    assert not any(scored.correct.values())


def test_an_ambiguous_call_in_prose_is_counted_in_its_own_bucket() -> None:
    """A bare call with prose on both sides lands in Ambiguous, and the cell's bucket rates count it."""
    text = "First I looked up get.weather(city='Paris') and the sky was clear.\nThen I answered from memory."
    record = _record(CALL, text)
    scored = score_output(record)
    assert (scored.bucket, dict(scored.candidate_buckets)) == ("Ambiguous", {"Ambiguous": 1})
    assert not any(scored.correct[m] for m in ("strict", "fallback", "repair"))
    summary = summarize_cell(
        record.cell, [(record, scored), (_record(CALL, "No call."), score_output(_record(CALL, "No call.")))]
    )
    assert (summary.buckets["Ambiguous"].value, summary.buckets["no_call"].value) == (0.5, 0.5)


def test_every_parser_bucket_is_a_reported_bucket() -> None:
    """BUCKETS lists every bucket a candidate can land in, then no_call and error."""
    assert set(BUCKETS) == ACCEPTED_BUCKETS | REJECTED_BUCKETS | {"no_call", "error"}


def test_a_call_on_irrelevance_is_a_false_positive_only_where_it_was_recovered() -> None:
    """On irrelevance, lenient JSON counts as a call for fallback/repair/json_repair, not for strict or baseline."""
    scored = score_output(
        _record(IRRELEVANT, "<tool_call>[{'name': 'get.weather', 'arguments': {'city': 'X'}}]</tool_call>")
    )
    assert scored.n_calls == {"strict": 0, "fallback": 1, "repair": 1, "baseline": 0, "json_repair": 1}
    assert scored.correct == {
        "strict": True,
        "fallback": False,
        "repair": False,
        "baseline": True,
        "json_repair": False,
    }
    assert scored.expects_no_call is True


def test_a_failed_request_is_wrong_in_every_mode() -> None:
    """A stored request error scores as the error bucket and wrong in every mode."""
    record = _record(CALL, "")
    record.error = "ProviderError: context too long"
    scored = score_output(record)
    assert (scored.bucket, set(scored.correct.values())) == ("error", {False})


def test_baseline_uses_native_calls_all_or_nothing() -> None:
    """In server parse mode the baseline json.loads each native call; one bad call empties the answer."""
    good = _record(CALL, "")
    good.native_calls = [{"id": "a", "name": "get.weather", "arguments": '{"city": "Paris"}'}]
    assert score_output(good).correct["baseline"] is True
    bad = _record(CALL, "")
    bad.native_calls = [
        {"id": "a", "name": "get.weather", "arguments": '{"city": "Paris"}'},
        {"id": "b", "name": "get.weather", "arguments": '{"city": "Paris",}'},
    ]
    assert score_output(bad).n_calls["baseline"] == 0


def test_json_repair_reads_name_and_arguments_objects() -> None:
    """json_repair recovers {name, arguments|parameters} objects, stringified arguments included."""
    assert json_repair_calls('x {"name": "f", "parameters": {"a": 1}} y') == [("f", {"a": 1})]
    assert json_repair_calls('[{"function": {"name": "g", "arguments": "{\\"b\\": 2}"}}]') == [("g", {"b": 2})]
    assert json_repair_calls("no json here") == []


def test_cell_key_round_trips_and_labels() -> None:
    """A cell key parses back into the same cell; labels show model@quant and non-default modes."""
    cell = Cell(backend="openrouter", model="qwen/qwen3-32b", quant="fp8", parse_mode="server", constrained=False)
    assert Cell.from_key(cell.key) == cell
    assert cell.key == "openrouter|qwen/qwen3-32b@fp8|server|free"
    assert cell.label == "qwen/qwen3-32b@fp8 [server]"


def test_constrained_cells_name_their_tool_choice() -> None:
    """A constrained cell's key and label say whether every output had to be a call; keys read back."""
    auto = Cell(backend="llamacpp", model="m", quant="Q4_1", constrained=True)
    required = Cell(backend="llamacpp", model="m", quant="Q4_1", constrained=True, tool_choice="required")
    assert (auto.key, required.key) == (
        "llamacpp|m@Q4_1|client|constrained",
        "llamacpp|m@Q4_1|client|constrained-required",
    )
    assert (auto.label, required.label) == ("m@Q4_1 [constrained]", "m@Q4_1 [constrained, required]")
    assert (Cell.from_key(auto.key), Cell.from_key(required.key)) == (auto, required)


def test_bootstrap_rate_is_seeded_and_brackets_the_value() -> None:
    """The bootstrap interval is the same on every call and contains the observed rate."""
    outcomes = [True] * 30 + [False] * 70
    first, second = rate(outcomes), rate(outcomes)
    assert first == second
    assert (first.k, first.n, first.value) == (30, 100, 0.3)
    assert first.low < 0.3 < first.high
    assert first.low > 0.2 and first.high < 0.4


def test_exact_rate_is_the_clopper_pearson_interval() -> None:
    """Known values: 0/30 has the closed form 1 - 0.025 ** (1 / 30) as its upper end; 17/20, 5/18 and 30/100 as
    tabulated (scipy.stats.binomtest(k, n).proportion_ci(method="exact"): 0.62107..0.96793, 0.09695..0.53480,
    0.21241..0.39981)."""
    none = exact_rate([False] * 30)
    assert (none.k, none.n, none.value, none.low) == (0, 30, 0.0, 0.0)
    assert none.high == pytest.approx(1 - 0.025 ** (1 / 30), abs=1e-9)
    for k, n, low, high in [(17, 20, 0.62107, 0.96793), (5, 18, 0.09695, 0.53480), (30, 100, 0.21241, 0.39981)]:
        got = exact_rate([True] * k + [False] * (n - k))
        assert (got.low, got.high) == (pytest.approx(low, abs=5e-5), pytest.approx(high, abs=5e-5)), (k, n)
    whole = exact_rate([True] * 6)
    assert (whole.low, whole.high) == (pytest.approx(0.025 ** (1 / 6), abs=1e-9), 1.0)
    assert exact_rate([]).fmt() == "n/a"


def test_paired_difference_is_exact_for_constant_differences() -> None:
    """When every paired item differs by the same amount, the interval collapses onto it."""
    a = {i: True for i in range(20)}
    b = {i: i >= 10 for i in range(20)}
    diff = paired_difference(a, b)
    assert (diff.value, diff.n) == (0.5, 20)
    assert diff.significant is True
    assert paired_difference({1: True}, {2: True}).n == 0


def test_pass_hat_k_uses_the_unbiased_estimator() -> None:
    """pass^k averages C(c,k)/C(n,k) over cases: 2 of 3 successes give 1/3 at k=2."""
    runs = {"a": [True, True, False], "b": [True, True, True]}
    assert pass_hat_k(runs, 1) == pytest.approx((2 / 3 + 1) / 2)
    assert pass_hat_k(runs, 2) == pytest.approx((1 / 3 + 1) / 2)
    assert pass_hat_k(runs, 3) == pytest.approx(0.5)


def test_a_placeholder_copied_from_the_prompt_is_a_call_only_for_the_serving_stack() -> None:
    """The prompt's example call echoed back is returned by the baseline (a false positive), never by tooldispatch."""
    echo = '<tool_call>[{"name": "function_name", "arguments": {"argument_name": "value"}}]</tool_call>\nThe answer'
    scored = score_output(_record(IRRELEVANT, echo))
    assert scored.n_calls == {"strict": 0, "fallback": 0, "repair": 0, "baseline": 1, "json_repair": 1}
    assert scored.bucket == "no_call"


def test_baseline_reads_an_unclosed_final_block_like_vllm() -> None:
    """An unclosed <tool_call> at the end is json-decoded whole; trailing prose makes the whole output text."""
    assert score_output(_record(CALL, '<tool_call>{"name": "get.weather", "arguments": {"city": "Paris"}}')).correct[
        "baseline"
    ]
    tail = '<tool_call>{"name": "get.weather", "arguments": {"city": "Paris"}}\nDone.'
    assert score_output(_record(CALL, tail)).n_calls["baseline"] == 0
