"""Report generation: files, and JSON numbers equal to what the scorer computed on a fixed corpus."""

from __future__ import annotations

import json
from pathlib import Path

from tooldispatch.bench.bfcl_data import BfclCase
from tooldispatch.bench.corpus import OutputRecord, read_corpus, write_corpus
from tooldispatch.bench.replay import compare_summaries, replay_corpus
from tooldispatch.bench.report import LEGENDS, report_title, summarize, write_report
from tooldispatch.bench.scoring import score_output
from tooldispatch.bench.summary import summarize_cell

FN = {
    "name": "get.weather",
    "description": "Weather for a city.",
    "parameters": {"type": "dict", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
GOOD = '<tool_call>[{"name": "get.weather", "arguments": {"city": "Paris"}}]</tool_call>'
LENIENT = "<tool_call>[{'name': 'get.weather', 'arguments': {'city': 'Paris'}}]</tool_call>"
PROSE = "It is sunny."


def _case(i: int, category: str) -> BfclCase:
    truth = () if category == "irrelevance" else ({"get.weather": {"city": ["Paris"]}},)
    return BfclCase(
        id=f"{category}_{i}",
        category=category,
        messages=({"role": "user", "content": "q"},),
        functions=(FN,),
        ground_truth=truth,
    )


def _corpus() -> list[OutputRecord]:
    """Two quantizations of one model on 6 call cases and 4 irrelevance cases, with fixed outputs."""
    plan = {
        "Q4_1": [GOOD, GOOD, GOOD, LENIENT, LENIENT, PROSE, PROSE, PROSE, PROSE, LENIENT],
        "Q4_0": [GOOD, LENIENT, LENIENT, LENIENT, PROSE, PROSE, PROSE, LENIENT, LENIENT, GOOD],
    }
    records = []
    for quant, texts in plan.items():
        for i, text in enumerate(texts):
            case = _case(i, "simple_python" if i < 6 else "irrelevance")
            records.append(
                OutputRecord(
                    cell=f"llamacpp|m@{quant}|client|free",
                    case_id=case.id,
                    seed=0,
                    case=case.to_dict(),
                    model="m",
                    quant=quant,
                    tensor_types={quant: 10},
                    engine="llama.cpp",
                    engine_version="0.3.36",
                    text=text,
                    finish_reason="stop",
                    completion_tokens=20,
                    latency_s=1.0 + i / 10,
                    first_token_s=0.5,
                    extra={"tool_format": "hermes_list"},
                )
            )
    return records


def test_report_writes_markdown_charts_and_json(tmp_path: Path) -> None:
    """write_report produces report.md, summary.json, four PNG charts and report.html."""
    files = write_report(summarize(_corpus()), tmp_path, html_too=True, title="t")
    names = sorted(p.name for p in files)
    assert names == [
        "accuracy.png",
        "buckets.png",
        "false_positives.png",
        "latency.png",
        "report.html",
        "report.md",
        "summary.json",
    ]
    assert all((tmp_path / n).stat().st_size > 1000 for n in names if n.endswith(".png"))
    md = (tmp_path / "report.md").read_text()
    assert "| m@Q4_1 | llama.cpp 0.3.36 | Q4_1×10 | 10 | 0 |" in md
    assert "![accuracy.png](accuracy.png)" in md


def test_summary_json_equals_the_scorer(tmp_path: Path) -> None:
    """Every rate in summary.json equals what score_output + summarize_cell give on the same corpus."""
    records = _corpus()
    write_report(summarize(records), tmp_path)
    data = json.loads((tmp_path / "summary.json").read_text())
    q41 = [r for r in records if r.quant == "Q4_1"]
    expected = summarize_cell(q41[0].cell, [(r, score_output(r)) for r in q41]).to_dict()
    [cell] = [c for c in data["cells"] if c["quant"] == "Q4_1"]
    assert cell == json.loads(json.dumps(expected))
    acc = {m: (v["k"], v["n"]) for m, v in cell["accuracy"].items()}
    assert acc == {"strict": (3, 6), "fallback": (5, 6), "repair": (5, 6), "baseline": (3, 6), "json_repair": (5, 6)}
    fp = {m: (v["k"], v["n"]) for m, v in cell["false_positive"].items()}
    assert fp == {"strict": (0, 4), "fallback": (1, 4), "repair": (1, 4), "baseline": (0, 4), "json_repair": (1, 4)}
    assert cell["buckets"]["ok_strict"]["k"] == 3
    assert cell["buckets"]["ok_fallback"]["k"] == 3
    assert cell["buckets"]["no_call"]["k"] == 4
    assert cell["latency_p50_s"] == 1.45


def test_quantization_differences_are_paired(tmp_path: Path) -> None:
    """The Q4_0 − Q4_1 difference is computed on the same cases: strict accuracy 1/6 − 3/6."""
    summary = summarize(_corpus())
    [diff] = summary.differences
    assert (diff.a, diff.b) == ("llamacpp|m@Q4_0|client|free", "llamacpp|m@Q4_1|client|free")
    assert round(diff.accuracy["strict"].value, 6) == round(1 / 6 - 3 / 6, 6)
    assert diff.accuracy["strict"].n == 6
    assert round(diff.false_positive["repair"].value, 6) == round(3 / 4 - 1 / 4, 6)


def test_differences_compare_quantizations_within_one_decoding_mode() -> None:
    """Cells of one model in different constrained modes are never set against each other as quantizations; each
    constrained cell is set against the same quantization decoded freely, and only that one."""
    records = _corpus()
    for mode in ("constrained", "constrained-required"):
        for r in _corpus():
            if r.quant == "Q4_1":
                r.cell = r.cell.replace("|free", f"|{mode}")
                r.constrained = True
                records.append(r)
    pairs = [(d.a, d.b) for d in summarize(records).differences]
    assert pairs == [
        ("llamacpp|m@Q4_0|client|free", "llamacpp|m@Q4_1|client|free"),
        ("llamacpp|m@Q4_1|client|constrained", "llamacpp|m@Q4_1|client|free"),
        ("llamacpp|m@Q4_1|client|constrained-required", "llamacpp|m@Q4_1|client|free"),
    ]


def test_constrained_cell_is_paired_with_the_same_file_decoded_freely(tmp_path: Path) -> None:
    """Constrained Q4_1 where every call case is GOOD, against free Q4_1 (3 GOOD of 6): strict +3/6 on the same
    cases; no constrained cell of another quantization, no pair."""
    records = _corpus()
    for r in _corpus():
        if r.quant == "Q4_1":
            r.cell = r.cell.replace("|free", "|constrained")
            r.constrained = True
            if r.case["category"] != "irrelevance":
                r.text = GOOD
            records.append(r)
    summary = summarize(records)
    [_, diff] = summary.differences
    assert (diff.a, diff.b) == ("llamacpp|m@Q4_1|client|constrained", "llamacpp|m@Q4_1|client|free")
    assert round(diff.accuracy["strict"].value, 6) == round(6 / 6 - 3 / 6, 6)
    assert diff.accuracy["strict"].n == 6
    assert diff.false_positive["repair"].value == 0.0
    write_report(summary, tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "| m@Q4_1 [constrained] − m@Q4_1 | accuracy | " in md


def test_cells_that_share_a_name_are_told_apart_by_backend(tmp_path: Path) -> None:
    """The same model@quant in process and through a server gets its backend in every label, the differences
    table included; a label no other cell shares stays as it is."""
    records = _corpus()
    for r in _corpus():
        if r.quant == "Q4_1":
            r.cell = r.cell.replace("llamacpp|", "openai|")
            records.append(r)
    summary = summarize(records)
    assert [c.label for c in summary.cells] == ["m@Q4_1 [llamacpp]", "m@Q4_0", "m@Q4_1 [openai]"]
    write_report(summary, tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "| m@Q4_1 [openai] | llama.cpp 0.3.36 | Q4_1×10 | 10 | 0 |" in md
    assert "| m@Q4_0 − m@Q4_1 [llamacpp] | accuracy |" in md


def test_replay_rescores_a_written_corpus_identically(tmp_path: Path) -> None:
    """A corpus written to JSONL and replayed gives the same summary as scoring it in memory."""
    records = _corpus()
    path = tmp_path / "corpus.jsonl"
    assert write_corpus(path, records) == 20
    assert [r.to_dict() for r in read_corpus(path)] == [r.to_dict() for r in records]
    summary, seconds, count = replay_corpus(path)
    assert count == 20
    assert seconds > 0
    direct = summarize(records, meta={"replayed": str(path)})
    assert summary.to_dict() == direct.to_dict()
    lines = compare_summaries(direct.to_dict(), summary.to_dict())
    assert lines == [
        "m@Q4_1 accuracy: unchanged",
        "m@Q4_1 false_positive: unchanged",
        "m@Q4_0 accuracy: unchanged",
        "m@Q4_0 false_positive: unchanged",
    ]


def test_title_names_models_engines_and_date() -> None:
    """The report's title says what ran, on which model and engine, and when."""
    summary = summarize(_corpus())
    assert report_title(summary, "BFCL", date="2026-12-01") == "BFCL — m@Q4_1, m@Q4_0 — llama.cpp 0.3.36 — 2026-12-01"


def test_each_table_has_its_legend_and_the_html_fits_a_phone(tmp_path: Path) -> None:
    """report.md explains the columns under the tables; report.html wraps long command lines and scales."""
    summary = summarize(_corpus(), meta={"command": "tooldispatch bench bfcl " + "--models m@Q4_1 " * 20})
    write_report(summary, tmp_path, html_too=True, title="BFCL")
    md = (tmp_path / "report.md").read_text()
    for legend in LEGENDS.values():
        assert md.count(legend) == 1
    assert md.splitlines()[0].startswith("# BFCL — m@Q4_1, m@Q4_0 — llama.cpp 0.3.36 — ")
    page = (tmp_path / "report.html").read_text()
    assert "<meta name='viewport' content='width=device-width, initial-scale=1'>" in page
    assert "pre{white-space:pre-wrap;overflow-wrap:anywhere;" in page
    assert "<div class='scroll'><table>" in page
    assert "<i>Columns:</i> <b>ok_strict</b> a call" in page


def test_palette_is_okabe_ito() -> None:
    """Every chart colour is one of the eight Okabe-Ito colours (or grey), and the compared modes differ."""
    from tooldispatch.bench import charts

    okabe_ito = {"#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7"}
    used = set(charts._MODE_COLORS.values()) | set(charts._BUCKET_COLORS.values())
    assert used - okabe_ito == {"#999999", "#DDDDDD"}
    assert len({charts._MODE_COLORS[m] for m in ("strict", "fallback", "repair")}) == 3
