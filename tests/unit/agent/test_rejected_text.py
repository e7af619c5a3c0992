"""An output that is wholly a rejected call candidate keeps the model's text: in the history and the transcript."""

from __future__ import annotations

import json

from tooldispatch.agent import Agent, Budget
from tooldispatch.backends.scripted import ScriptedBackend, ScriptedTurn
from tooldispatch.dispatch import Dispatcher, Registry

BROKEN = '<tool_call>{"name": "get_weather", "arguments": {"city" "Paris"}}</tool_call>'
WRONG_KEY = '{"name": "get_weather", "arguments": {"town": "Paris"}}'


def _registry() -> Registry:
    reg = Registry()
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    reg.register("get_weather", lambda city: {"sky": "sunny"}, schema=schema, read_only=True)
    return reg


def _run(*turns: str, max_turns: int = 2) -> tuple[ScriptedBackend, Agent]:
    backend = ScriptedBackend([ScriptedTurn(content=t) for t in turns])
    return backend, Agent(backend=backend, dispatcher=Dispatcher(_registry()), budget=Budget(max_turns=max_turns))


def test_an_unreadable_call_stays_in_the_history_as_the_model_wrote_it() -> None:
    """A tagged call with unreadable JSON is rejected (InvalidJson); the next prompt holds it verbatim, then why."""
    backend, agent = _run(BROKEN, "It is sunny.")
    run = agent.run("Weather?")
    assert run.turns[0].outcome.rejected[0].bucket == "InvalidJson"
    sent = backend.requests[1].messages
    assert sent[1] == {"role": "assistant", "content": BROKEN}
    assert sent[2]["role"] == "user" and sent[2]["content"].startswith("Your tool call could not be used:")
    assert run.final_answer == "It is sunny."


def test_a_call_refused_for_its_arguments_is_kept_as_the_call_the_model_wrote() -> None:
    """A schema-refused call goes back as the model's tool call, with its own arguments, answered by the error."""
    backend, agent = _run(WRONG_KEY, "It is sunny.")
    agent.run("Weather?")
    assistant, tool = backend.requests[1].messages[1:3]
    assert assistant["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": '{"town": "Paris"}'}
    assert json.loads(tool["content"])["error"] == "invalid_arguments"


def test_a_run_that_ends_on_a_rejected_output_keeps_its_text_in_the_transcript() -> None:
    """No final answer is made up from a rejected call, and the transcript keeps the text with the rejection."""
    _, agent = _run(BROKEN, max_turns=1)
    run = agent.run("Weather?")
    assert (run.end, run.final_answer) == ("max_turns", None)
    turn = run.to_dict()["turns"][0]
    assert turn["content"] == BROKEN
    assert [c["bucket"] for c in turn["parse"]["candidates"]] == ["InvalidJson"]
    assert run.summary()["buckets"] == {"InvalidJson": 1}
