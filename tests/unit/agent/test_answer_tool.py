"""The agent's answer tool (``answer_tool=True``): a call to ``final_answer`` is the run's answer, never dispatched."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tooldispatch.agent import Agent
from tooldispatch.agent.feedback import EARLY_ANSWER, REPEATED_SUCCESS_NOTE
from tooldispatch.agent.loop import ANSWER_TOOL
from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.dispatch import Dispatcher, Registry
from tooldispatch.errors import ConfigError


def _registry(log: list[tuple[str, dict[str, Any]]]) -> Registry:
    reg = Registry()

    def get_time(timezone: str) -> dict[str, Any]:
        log.append(("get_time", {"timezone": timezone}))
        if timezone == "Nowhere":
            raise ValueError("unknown timezone 'Nowhere'")
        return {"timezone": timezone, "datetime": "2026-12-02T08:01:51+09:00"}

    def send_note(text: str) -> dict[str, Any]:
        log.append(("send_note", {"text": text}))
        return {"sent": True}

    schema = {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}
    reg.register("get_time", get_time, description="Current time", schema=schema, read_only=True)
    reg.register(
        "send_note",
        send_note,
        description="Send a note",
        schema={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
        read_only=False,
    )
    return reg


def _line(name: str, **args: Any) -> str:
    return json.dumps({"name": name, "arguments": args})


def test_final_answer_call_ends_the_run_with_its_answer() -> None:
    """A turn that calls final_answer ends the run: its answer is the final answer and the history's last message."""
    log: list[tuple[str, dict[str, Any]]] = []
    backend = ScriptedBackend(
        [
            ScriptedTurn(content=_line("get_time", timezone="Asia/Tokyo")),
            ScriptedTurn(content=_line("final_answer", answer="It is 08:01 in Tokyo.")),
        ]
    )
    run = Agent(backend=backend, dispatcher=Dispatcher(_registry(log)), answer_tool=True).run("Time in Tokyo?")
    assert run.end == "final_answer"
    assert run.final_answer == "It is 08:01 in Tokyo."
    assert log == [("get_time", {"timezone": "Asia/Tokyo"})]
    assert [r.call.name for r in run.tool_runs] == ["get_time"]
    assert run.messages[-1] == {"role": "assistant", "content": "It is 08:01 in Tokyo."}
    assert [t.name for t in backend.requests[0].tools] == ["get_time", "send_note", "final_answer"]


def test_calls_before_the_answer_run_and_calls_after_it_are_refused() -> None:
    """In the answering turn (after a result came back), the calls written before final_answer run; those after it
    are refused, not run, and a repeated final_answer is dropped."""
    log: list[tuple[str, dict[str, Any]]] = []
    turn = "\n".join(
        [
            _line("get_time", timezone="UTC"),
            _line("final_answer", answer="done"),
            _line("send_note", text="hi"),
            _line("final_answer", answer="done"),
        ]
    )
    backend = ScriptedBackend(
        [ScriptedTurn(content=_line("get_time", timezone="Asia/Tokyo")), ScriptedTurn(content=turn)]
    )
    run = Agent(backend=backend, dispatcher=Dispatcher(_registry(log)), answer_tool=True).run("Go")
    assert run.final_answer == "done"
    assert log == [("get_time", {"timezone": "Asia/Tokyo"}), ("get_time", {"timezone": "UTC"})]
    assert [(r.call.name, r.result.status, r.result.reason) for r in run.tool_runs] == [
        ("get_time", "ok", None),
        ("get_time", "ok", None),
        ("send_note", "rejected", "after_final_answer"),
    ]
    assert [m["role"] for m in run.messages] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [c["function"]["name"] for c in run.messages[3]["tool_calls"]] == ["get_time"]


def test_without_the_answer_tool_final_answer_is_not_offered_or_taken() -> None:
    """Off (the default), final_answer is neither offered nor treated as an answer: the call is refused as unknown."""
    backend = ScriptedBackend(
        [ScriptedTurn(content=_line("final_answer", answer="x")), ScriptedTurn(content="The answer is x.")]
    )
    run = Agent(backend=backend, dispatcher=Dispatcher(_registry([]))).run("Go")
    assert [t.name for t in backend.requests[0].tools] == ["get_time", "send_note"]
    assert run.final_answer == "The answer is x."
    assert len(run.turns) == 2


def test_a_plain_text_answer_still_ends_the_run() -> None:
    """With the answer tool on, an answer in plain text ends the run as before."""
    run = Agent(
        backend=ScriptedBackend([ScriptedTurn(content="It is late.")]),
        dispatcher=Dispatcher(_registry([])),
        answer_tool=True,
    ).run("Go")
    assert (run.end, run.final_answer) == ("final_answer", "It is late.")


def test_a_final_answer_without_its_answer_is_sent_back() -> None:
    """A final_answer call without ``answer`` is refused with feedback naming the argument, and the run goes on."""
    backend = ScriptedBackend(
        [
            ScriptedTurn(content=_line("final_answer", reply="x")),
            ScriptedTurn(content=_line("final_answer", answer="x")),
        ]
    )
    run = Agent(backend=backend, dispatcher=Dispatcher(_registry([])), answer_tool=True).run("Go")
    assert run.final_answer == "x"
    assert len(run.turns) == 2
    assert run.turns[0].feedback is not None and "answer" in run.turns[0].feedback


def test_a_tool_of_the_same_name_is_a_config_error() -> None:
    """A user tool already named final_answer and the answer tool cannot both be offered."""
    reg = Registry()
    reg.register("final_answer", lambda answer: answer, description="mine", schema=ANSWER_TOOL.parameters)
    with pytest.raises(ConfigError, match="final_answer"):
        Agent(backend=ScriptedBackend([]), dispatcher=Dispatcher(reg), answer_tool=True)


def test_a_repeated_successful_call_is_answered_with_a_note_naming_its_first_turn() -> None:
    """With the answer tool (and the repeat guard off), a call identical to one that succeeded in an earlier turn
    still runs, and its answer carries its result under a note naming that turn and final_answer; without the tool
    the answer is plain."""
    call = _line("get_time", timezone="Asia/Tokyo")
    for answer_tool in (True, False):
        log: list[tuple[str, dict[str, Any]]] = []
        backend = ScriptedBackend([ScriptedTurn(content=call), ScriptedTurn(content=call), ScriptedTurn(content="ok")])
        agent = Agent(
            backend=backend, dispatcher=Dispatcher(_registry(log)), answer_tool=answer_tool, repeat_guard=False
        )
        run = agent.run("Time?")
        assert len(log) == 2
        first, second = (json.loads(m["content"]) for m in run.messages if m["role"] == "tool")
        result = {"timezone": "Asia/Tokyo", "datetime": "2026-12-02T08:01:51+09:00"}
        assert first == result
        if answer_tool:
            assert second == {"note": REPEATED_SUCCESS_NOTE.format(turn=1), "result": result}
        else:
            assert second == result


def test_the_stream_is_closed_once_a_tagged_final_answer_is_complete() -> None:
    """With early dispatch, the turn's stream stops right after a complete ``<tool_call>`` final_answer: what the
    model would write next is never generated; without early dispatch the whole turn is read."""
    answer = "<tool_call>" + _line("final_answer", answer="08:01") + "</tool_call>"
    rest = "\n<tool_call>" + _line("send_note", text="hi") + "</tool_call>"
    for early in (True, False):
        backend = ScriptedBackend([ScriptedTurn(content=answer + rest)])
        run = Agent(backend=backend, dispatcher=Dispatcher(_registry([])), answer_tool=True, early_dispatch=early).run(
            "Go"
        )
        completion = run.turns[0].completion
        assert run.final_answer == "08:01"
        if early:
            assert completion.content.startswith(answer) and "send_note" not in completion.content
            assert completion.finish_reason is None
            assert run.tool_runs == ()
        else:
            assert completion.content == answer + rest
            assert completion.finish_reason == "stop"
            assert [(r.call.name, r.result.reason) for r in run.tool_runs] == [("send_note", "after_final_answer")]


def test_an_answer_written_before_any_result_is_sent_back_and_the_calls_run() -> None:
    """A final_answer after other calls in the run's first turn with calls is not taken: the calls run, the answer
    gets ``answer_before_results``, and the next turn's final_answer ends the run."""
    log: list[tuple[str, dict[str, Any]]] = []
    first = "\n".join(
        [_line("get_time", timezone="Tokyo"), _line("final_answer", answer="12:34"), _line("final_answer", answer="1")]
    )
    backend = ScriptedBackend(
        [ScriptedTurn(content=first), ScriptedTurn(content=_line("final_answer", answer="08:01"))]
    )
    run = Agent(backend=backend, dispatcher=Dispatcher(_registry(log)), answer_tool=True).run("Time?")
    assert (run.end, run.final_answer, len(run.turns)) == ("final_answer", "08:01", 2)
    assert log == [("get_time", {"timezone": "Tokyo"})]
    assistant, *answers = [dict(m) for m in backend.requests[1].messages][1:]
    assert [c["function"]["name"] for c in assistant["tool_calls"]] == ["get_time", "final_answer"]
    assert [m["name"] for m in answers] == ["get_time", "final_answer"]
    assert json.loads(answers[1]["content"]) == EARLY_ANSWER


def test_an_answer_that_opens_the_first_turn_is_taken() -> None:
    """A final_answer with no call before it ends the run even before any tool ran (the model needed none)."""
    run = Agent(
        backend=ScriptedBackend([ScriptedTurn(content=_line("final_answer", answer="42"))]),
        dispatcher=Dispatcher(_registry([])),
        answer_tool=True,
    ).run("Go")
    assert (run.end, run.final_answer, run.tool_runs) == ("final_answer", "42", ())


def test_an_answer_after_calls_is_sent_back_until_a_call_has_succeeded() -> None:
    """Failed calls do not count as results: a final_answer after calls is sent back while no call has succeeded,
    and one that opens its turn is taken (the model may say the tools failed)."""
    bad = _line("get_time", timezone="Nowhere")
    backend = ScriptedBackend(
        [
            ScriptedTurn(content=bad),
            ScriptedTurn(content=bad + "\n" + _line("final_answer", answer="12:00")),
            ScriptedTurn(content=_line("final_answer", answer="The time service failed.")),
        ]
    )
    run = Agent(backend=backend, dispatcher=Dispatcher(_registry([])), answer_tool=True).run("Time?")
    assert (run.final_answer, len(run.turns)) == ("The time service failed.", 3)
    assert [r.result.status for r in run.tool_runs] == ["error", "error"]
    assert json.loads(backend.requests[2].messages[-1]["content"]) == EARLY_ANSWER
