"""A scripted OpenAI-compatible model on 127.0.0.1 that plays the demo world, for driving run and chat.

Its answers follow the last message: after a tool result it answers in words (quoting the result's first
line, through the ``final_answer`` tool when the prompt offers it); a user message that names an order it
knows calls a tool as hermes text (the client parses it): "cancel o-101" calls cancel_order (which waits for
approval), "look up o-101" calls get_order, "what did I ask" answers with the first user message it was sent
(so a test sees that the conversation carried over). "keep checking o-101" calls get_order again after each
result for as long as the request offers tools (the loop the repeat guard and the stuck detector end).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from tooldispatch.backends.scripted import ScriptedTurn
from tooldispatch.proxy.scripted import ScriptedServer, serve_in_thread


def _call(name: str, arguments: dict[str, Any]) -> ScriptedTurn:
    return ScriptedTurn(content=f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>")


def script(body: Mapping[str, Any]) -> ScriptedTurn:
    """The demo world's scripted model."""
    messages = body["messages"]
    last = messages[-1]
    asked = next((str(m.get("content") or "") for m in reversed(messages) if m["role"] == "user"), "")
    looping = re.search(r"keep checking (o-\d{3})", asked)
    offered = body.get("tools") or any('"get_order"' in str(m.get("content") or "") for m in messages[:1])
    if looping and offered:
        return _call("get_order", {"order_id": looping.group(1)})
    if last["role"] == "tool":
        answer = f"Done: {str(last['content'])[:60]}"
        if any('"final_answer"' in str(m.get("content") or "") for m in messages if m["role"] == "system"):
            return _call("final_answer", {"answer": answer})
        return ScriptedTurn(content=answer)
    text = str(last.get("content") or "")
    order = re.search(r"o-\d{3}", text)
    if "cancel" in text and order:
        return _call("cancel_order", {"order_id": order.group(0), "reason": "the customer asked"})
    if "look up" in text and order:
        return _call("get_order", {"order_id": order.group(0)})
    if "what did I ask" in text:
        first = next(m["content"] for m in messages if m["role"] == "user")
        return ScriptedTurn(content=f"You first asked: {first}")
    return ScriptedTurn(content=f"You said: {text}")


@contextmanager
def upstream() -> Iterator[str]:
    """The scripted model's base URL (``http://127.0.0.1:PORT/v1``) while the block runs."""
    server = ScriptedServer(script=script, model="smollm2-135m-instruct")
    with serve_in_thread(server.app()) as running:
        yield f"{running.url}/v1"


if __name__ == "__main__":  # serve until killed: python tests/integration/cli/upstream.py
    with upstream() as url:
        print(url, flush=True)
        sys.stdin.read()
