"""``tooldispatch trace``, ``approvals`` and ``bench dispatch`` against real state files."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tooldispatch.cli import app
from tooldispatch.dispatch import Dispatcher, DispatchResult, ManualClock
from tooldispatch.tools.demo import DemoWorld, build_registry

pytestmark = pytest.mark.integration

runner = CliRunner()


@dataclass
class Setup:
    state: Path
    world_path: Path
    tools: str
    results: dict[str, DispatchResult]


@pytest.fixture
def setup(tmp_path: Path) -> Setup:
    world_path = tmp_path / "world.db"
    state = tmp_path / "state.db"
    world = DemoWorld.seed(world_path)
    d = Dispatcher(build_registry(world), store=state, clock=ManualClock(1_700_000_000.0))
    results = {
        "stale": d.dispatch("assign_driver", {"driver_id": "d-north-1", "order_id": "o-101"}, session_id="s1"),
        "refresh": d.dispatch("refresh_drivers", {"zone": "north"}, session_id="s1"),
        "assign": d.dispatch("assign_driver", {"driver_id": "d-north-1", "order_id": "o-101"}, session_id="s1"),
        "ghost": d.dispatch("assign_drivers", {"driver_id": "d-north-1"}, session_id="s1"),
        "cancel": d.dispatch("cancel_order", {"order_id": "o-301", "reason": "customer request"}, session_id="s2"),
    }
    d.close()
    world.close()
    tools_file = tmp_path / "demo_tools.py"
    tools_file.write_text(
        "from tooldispatch.tools.demo import DemoWorld, build_registry\n\n\n"
        f"def make():\n    return build_registry(DemoWorld.seed({str(world_path)!r}))\n",
        encoding="utf-8",
    )
    return Setup(state, world_path, f"{tools_file}:make", results)


def test_trace_list_table(setup: Setup) -> None:
    """trace list prints one row per trace, oldest first, with id prefix, tool, status and reason."""
    out = runner.invoke(app, ["trace", "list", "--store", str(setup.state)])
    assert out.exit_code == 0, out.output
    assert f"traces in {setup.state} (5)" in out.output
    rows = [line for line in out.output.splitlines() if line.startswith("│")]
    expected = [
        ("stale", "assign_driver", "rejected", "stale_state_must_refresh"),
        ("refresh", "refresh_drivers", "ok", ""),
        ("assign", "assign_driver", "ok", ""),
        ("ghost", "assign_drivers", "rejected", "tool_hallucination"),
        ("cancel", "cancel_order", "awaiting_approval", "awaiting_approval"),
    ]
    assert len(rows) == len(expected)
    for row, (key, tool, status, reason) in zip(rows, expected, strict=True):
        cells = [c.strip() for c in row.strip("│").split("│")]
        assert cells[0] == setup.results[key].trace.id[:12]
        assert cells[1] == "2023-11-14 22:13:20"
        assert cells[3:6] == [tool, status, reason]


def test_trace_list_filters_and_otel(setup: Setup) -> None:
    """--session and --tool filter the list; --otel prints execute_tool spans as JSON."""
    out = runner.invoke(
        app, ["trace", "list", "--store", str(setup.state), "--session", "s1", "--tool", "assign_driver", "--otel"]
    )
    assert out.exit_code == 0, out.output
    spans = json.loads(out.output)
    assert [s["name"] for s in spans] == ["execute_tool assign_driver", "execute_tool assign_driver"]
    assert [s["attributes"]["tooldispatch.status"] for s in spans] == ["rejected", "ok"]
    assert spans == [setup.results["stale"].trace.to_otel(), setup.results["assign"].trace.to_otel()]


def test_trace_list_limit(setup: Setup) -> None:
    """--limit keeps the most recent traces."""
    out = runner.invoke(app, ["trace", "list", "--store", str(setup.state), "--limit", "2", "--otel"])
    assert [s["attributes"]["gen_ai.tool.name"] for s in json.loads(out.output)] == ["assign_drivers", "cancel_order"]


def test_trace_show_by_prefix(setup: Setup) -> None:
    """trace show accepts an id prefix and prints the trace as stored; --otel prints its span."""
    trace = setup.results["assign"].trace
    out = runner.invoke(app, ["trace", "show", trace.id[:10], "--store", str(setup.state)])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output) == json.loads(json.dumps(trace.to_dict()))
    out = runner.invoke(app, ["trace", "show", trace.id, "--store", str(setup.state), "--otel"])
    assert json.loads(out.output) == trace.to_otel()


def test_trace_show_full_result(setup: Setup) -> None:
    """--result adds the full stored result of the call."""
    trace = setup.results["assign"].trace
    out = runner.invoke(app, ["trace", "show", trace.id, "--store", str(setup.state), "--result"])
    data = json.loads(out.output)
    assert json.loads(data["result"]) == {"order_id": "o-101", "driver_id": "d-north-1", "status": "assigned"}


def test_trace_show_unknown(setup: Setup) -> None:
    """An unknown id exits 1 and says how to find ids."""
    out = runner.invoke(app, ["trace", "show", "ffff0000", "--store", str(setup.state)])
    assert out.exit_code == 1
    assert out.output == "no trace 'ffff0000'; run 'tooldispatch trace list' to see the ids\n"


def test_trace_show_rejects_non_hex(setup: Setup) -> None:
    """An id with characters that are not hexadecimal is refused before any lookup."""
    out = runner.invoke(app, ["trace", "show", "%", "--store", str(setup.state)])
    assert out.exit_code == 1
    assert out.output == "'%' is not a trace id; ids are hexadecimal, as 'tooldispatch trace list' shows\n"


def test_missing_store(tmp_path: Path) -> None:
    """A state file that does not exist is not created; the command exits 2 with the fix."""
    missing = tmp_path / "nope.db"
    out = runner.invoke(app, ["trace", "list", "--store", str(missing)])
    assert out.exit_code == 2
    assert out.output == (
        f"error: no state file at {missing}; pass --store with the file given to Dispatcher(store=...)\n"
    )
    assert not missing.exists()


def test_store_that_is_not_sqlite(tmp_path: Path) -> None:
    """A state file that is not SQLite is one error line with exit code 2, not a traceback."""
    bad = tmp_path / "state.db"
    bad.write_text("not a database")
    out = runner.invoke(app, ["trace", "list", "--store", str(bad)])
    assert out.exit_code == 2
    assert out.output == (
        f"error: cannot read the state store {str(bad)!r}: file is not a database; "
        "pass --store with the file given to Dispatcher(store=...)\n"
    )


def test_console_script_prints_tooldispatch_errors_as_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An error of tooldispatch's own that a command did not report ends the script with one line, exit 2."""
    import tooldispatch.cli as cli
    from tooldispatch.errors import ConfigError

    class Broken:
        def main(self, args: object, prog_name: str, standalone_mode: bool) -> None:
            raise ConfigError("no profile 'x'; known profiles: a, b")

    monkeypatch.setattr(cli, "command", Broken)
    with pytest.raises(SystemExit) as exited:
        cli.main([])
    assert exited.value.code == 2
    assert capsys.readouterr().err == "error: no profile 'x'; known profiles: a, b\n"


def test_trace_stats_json(setup: Setup) -> None:
    """trace stats --json gives per-tool counts and the flagged rates."""
    out = runner.invoke(app, ["trace", "stats", "--store", str(setup.state), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert {name: m["calls"] for name, m in data["tools"].items()} == {
        "assign_driver": 2,
        "refresh_drivers": 1,
        "assign_drivers": 1,
        "cancel_order": 1,
    }
    assert data["tools"]["assign_drivers"]["counts"]["hallucination"] == 1
    assert data["overall"]["flags"] == ["hallucination"]
    assert data["flagged"] == [
        "assign_drivers: hallucination 100.0% (threshold 0%) — the model called a tool that does not exist"
    ]
    assert data["thresholds"]["validation_failure"] == 0.15


def test_trace_stats_table(setup: Setup) -> None:
    """The stats table marks rates over threshold and lists each flag with its action."""
    out = runner.invoke(app, ["trace", "stats", "--store", str(setup.state)])
    assert out.exit_code == 0, out.output
    assert "100.0% !" in out.output
    assert out.output.rstrip().endswith(
        "flag assign_drivers: hallucination 100.0% (threshold 0%) — the model called a tool that does not exist"
    )


def test_approvals_list(setup: Setup) -> None:
    """approvals list shows the suspended cancel with its arguments."""
    out = runner.invoke(app, ["approvals", "list", "--store", str(setup.state), "--json"])
    assert out.exit_code == 0, out.output
    pending = json.loads(out.output)
    assert [(p["id"], p["tool"], p["args"], p["state"]) for p in pending] == [
        (
            setup.results["cancel"].approval_id,
            "cancel_order",
            {"order_id": "o-301", "reason": "customer request"},
            "pending",
        )
    ]
    table = runner.invoke(app, ["approvals", "list", "--store", str(setup.state)])
    assert str(setup.results["cancel"].approval_id) in table.output


def test_approve_with_edited_args_runs_tool(setup: Setup) -> None:
    """approve runs the suspended call with edited arguments, once; a second approve is refused."""
    approval = str(setup.results["cancel"].approval_id)
    args = json.dumps({"order_id": "o-301", "reason": "duplicate order"})
    out = runner.invoke(
        app, ["approvals", "approve", approval, "--store", str(setup.state), "--tools", setup.tools, "--args", args]
    )
    assert out.exit_code == 0, out.output
    printed = json.loads(out.output)
    assert (printed["status"], printed["reason"]) == ("ok", None)
    assert json.loads(printed["content"]) == {"order_id": "o-301", "status": "cancelled", "reason": "duplicate order"}
    world = DemoWorld(setup.world_path)
    assert world.get_order("o-301")["status"] == "cancelled"
    assert [e.detail["reason"] for e in world.audit("cancel_order")] == ["duplicate order"]
    again = runner.invoke(app, ["approvals", "approve", approval, "--store", str(setup.state), "--tools", setup.tools])
    assert again.exit_code == 1
    assert again.output == f"error: approval {approval!r} was already approved; each approval is decided once\n"
    assert world.count_effects("cancel_order") == 1


def test_deny(setup: Setup) -> None:
    """deny records the decision and the call never runs."""
    approval = str(setup.results["cancel"].approval_id)
    out = runner.invoke(app, ["approvals", "deny", approval, "--store", str(setup.state), "--reason", "not allowed"])
    assert out.exit_code == 1
    printed = json.loads(out.output)
    assert (printed["status"], printed["reason"]) == ("rejected", "approval_denied")
    assert json.loads(printed["content"])["message"] == "a person denied this cancel_order call: not allowed"
    assert DemoWorld(setup.world_path).count_effects() == 1  # the assignment only
    listed = json.loads(runner.invoke(app, ["approvals", "list", "--store", str(setup.state), "--json"]).output)
    assert listed == []


def test_approve_needs_tools_and_valid_args(setup: Setup) -> None:
    """approve of a call no kept run suspended needs --tools; --args must be a JSON object; exit 1 names the fix."""
    approval = str(setup.results["cancel"].approval_id)
    base = ["approvals", "approve", approval, "--store", str(setup.state)]
    out = runner.invoke(app, base)
    assert (out.exit_code, out.output) == (
        1,
        f"error: approval {approval!r} was not suspended by a kept run of `tooldispatch run` or `chat`; pass the "
        "tools it was suspended on: --tools 'package.module:attr' or --mcp FILE\n",
    )
    out = runner.invoke(app, [*base, "--tools", setup.tools, "--args", "[1]"])
    assert out.exit_code == 1
    assert out.output.startswith("error: --args must be a JSON object")
    out = runner.invoke(app, [*base, "--tools", setup.tools, "--args", "{bad"])
    assert out.output.startswith("error: --args is not valid JSON (Expecting property name enclosed in double quotes")
    out = runner.invoke(app, [*base, "--tools", "no_such_module_xyz:make"])
    assert out.output == (
        "error: --tools 'no_such_module_xyz:make': no module named 'no_such_module_xyz'; check the name\n"
    )
    assert DemoWorld(setup.world_path).count_effects("cancel_order") == 0


def test_approve_unknown_id(setup: Setup) -> None:
    """An unknown approval id exits 1 and says where to find the ids."""
    out = runner.invoke(app, ["approvals", "approve", "apr_nope", "--store", str(setup.state), "--tools", setup.tools])
    assert out.exit_code == 1
    assert out.output == ("error: no approval 'apr_nope'; list pending ones with Dispatcher.approvals()\n")


def test_bench_dispatch_json() -> None:
    """bench dispatch --json reports both overheads against the bare call and the throughput run."""
    out = runner.invoke(
        app,
        [
            "bench",
            "dispatch",
            "--json",
            "--iterations",
            "100",
            "--side-effect-iterations",
            "100",
            "--sessions",
            "2",
            "--calls-per-session",
            "10",
        ],
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["read_only"]["bare"]["name"] == "bare noop()"
    assert data["read_only"]["dispatched"]["n"] == 100
    assert data["read_only"]["target_us"] == 100.0
    assert data["side_effecting"]["target_us"] == 2000.0
    assert data["side_effecting"]["dispatched"]["name"] == "dispatch record (idempotent, SQLite file)"
    assert (data["throughput"]["sessions"], data["throughput"]["calls"]) == (2, 20)
    assert set(data["throughput"]) == {
        "sessions",
        "calls",
        "bare_calls_per_s",
        "dispatched_calls_per_s",
        "one_session_calls_per_s",
    }
    assert (data["thread_hop"]["name"], data["thread_hop"]["n"]) == ("noop() in a worker thread", 100)


@pytest.mark.parametrize(
    ("source", "attr", "expected"),
    [
        ("x = 1\ndef make(:\n", "make", "{dir}/tools.py:2: SyntaxError: invalid syntax"),
        (
            "import os\nraise RuntimeError('no database configured')\n",
            "make",
            "{dir}/tools.py:2: RuntimeError: no database configured",
        ),
        ("def make():\n    return {}['missing']\n", "make", "make() raised: {dir}/tools.py:2: KeyError: 'missing'"),
    ],
    ids=["syntax-error", "raises-at-import", "factory-raises"],
)
def test_fault6_tools_module_that_fails_is_one_line(
    setup: Setup, tmp_path: Path, source: str, attr: str, expected: str
) -> None:
    """Fault 6: a --tools file that cannot be imported, or whose factory raises, is one line naming file and line."""
    module = tmp_path / "tools.py"
    module.write_text(source)
    approval = str(setup.results["cancel"].approval_id)
    out = runner.invoke(
        app, ["approvals", "approve", approval, "--store", str(setup.state), "--tools", f"{module}:{attr}"]
    )
    assert out.exit_code == 1
    assert out.output == f"error: --tools '{module}:{attr}': {expected.format(dir=module.parent)}\n"
    assert DemoWorld(setup.world_path).count_effects("cancel_order") == 0
