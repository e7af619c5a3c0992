"""``tooldispatch proxy`` safety checks, ``proxy stats`` and ``report`` on the traffic of a real proxy."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from typer.testing import CliRunner

from tooldispatch.cli import app

from .conftest import ASK, WEATHER, scripted_proxy

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]
runner = CliRunner()


def traffic(tmp_path: Path, *, record: bool) -> Path:
    """Serve three requests (two with tools, one without) through a scripted proxy; return its state file."""
    with scripted_proxy(tmp_path, record=record) as running:
        sdk = openai.OpenAI(base_url=running.url, api_key="x", max_retries=0)
        sdk.chat.completions.create(model="m", messages=ASK, tools=[WEATHER])  # type: ignore[list-item]
        list(sdk.chat.completions.create(model="m", messages=ASK, tools=[WEATHER], stream=True))  # type: ignore[list-item]
        sdk.chat.completions.create(model="m", messages=ASK)
        running.counted(3)
    return tmp_path / "state.db"


def test_bodies_are_kept_only_with_record(tmp_path: Path) -> None:
    """Without --record no body is stored; with it, each request's body, raw output and answer are."""
    from tooldispatch.store import Store

    plain = Store(traffic(tmp_path / "a", record=False))
    recorded = Store(traffic(tmp_path / "b", record=True))
    try:
        assert plain.fetchone("SELECT COUNT(*) FROM proxy_records") == (0,)
        assert plain.fetchone("SELECT COUNT(*) FROM proxy_requests") == (3,)
        rows = recorded.fetchall("SELECT request, output, answer FROM proxy_records")
        assert len(rows) == 3
        assert all('"Weather in Paris?"' in request for request, _, _ in rows)
        assert sum("<tool_call>" in output for _, output, _ in rows) == 2
    finally:
        plain.close()
        recorded.close()


def test_stats_prints_the_rates_per_model(tmp_path: Path) -> None:
    """proxy stats lists the model with its requests and the repaired share of its candidates."""
    state = traffic(tmp_path, record=False)
    result = runner.invoke(app, ["proxy", "stats", "--store", str(state)], terminal_width=250)
    assert result.exit_code == 0, result.output
    line = next(row for row in result.output.splitlines() if "scripted" in row)
    cells = [c.strip() for c in line.strip("│ ").split("│")]
    assert cells[:7] == ["scripted", "served", "3", "2", "0", "2", "2"]
    assert cells[9] == "2 (100%)"  # repaired (the enum's case)
    assert cells[-2] == "enum 2"


def test_report_draws_the_proxy_rates(tmp_path: Path) -> None:
    """tooldispatch report on a proxy's state file writes the Markdown table and the PNG."""
    state = traffic(tmp_path, record=False)
    result = runner.invoke(app, ["report", str(state), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["proxy.md", "proxy_buckets.png"]
    assert "| scripted | served | 3 | 2 | 0 | 2 | 2 |" in (tmp_path / "out" / "proxy.md").read_text()


def test_stats_without_a_state_file_says_what_to_pass(tmp_path: Path) -> None:
    """proxy stats on a missing file is one error line naming --store."""
    result = runner.invoke(app, ["proxy", "stats", "--store", str(tmp_path / "none.db")])
    assert result.exit_code == 2
    assert "no state file at" in result.output and "--store" in result.output


def test_serving_on_the_network_needs_a_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Listening beyond loopback without --api-key-env is refused, and an unset key variable is named."""
    monkeypatch.delenv("TD_UNSET_KEY", raising=False)
    exposed = runner.invoke(app, ["proxy", "--host", "0.0.0.0", "--store", str(tmp_path / "s.db")])
    assert exposed.exit_code == 2
    assert "pass --api-key-env VAR" in exposed.output
    unset = runner.invoke(app, ["proxy", "--api-key-env", "TD_UNSET_KEY", "--store", str(tmp_path / "s.db")])
    assert unset.exit_code == 2
    assert "--api-key-env TD_UNSET_KEY: that environment variable is unset or empty" in unset.output
    assert not (tmp_path / "s.db").exists()
