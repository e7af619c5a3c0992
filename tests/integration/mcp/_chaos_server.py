"""A small stdio MCP server without the SDK, for the kill-mid-call chaos test (it starts in milliseconds).

It speaks the handshake-era protocol (``initialize``; ``server/discover`` is refused, so the SDK's client falls
back to it). Tools: ``lookup`` (read-only) and ``record`` (side-effecting). Each call appends ``start <id>``
to the journal, waits, and ``record`` then appends ``effect <id>`` (the side effect) before waiting again,
so a kill can land before or after the effect. ``CHAOS_START_DELAY_S`` delays its start.
Usage: python _chaos_server.py JOURNAL.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time

JOURNAL = sys.argv[1]
SCHEMA = {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}
TOOLS = [
    {"name": "lookup", "description": "Look an id up.", "inputSchema": SCHEMA, "annotations": {"readOnlyHint": True}},
    {
        "name": "record",
        "description": "Record an id (a side effect).",
        "inputSchema": SCHEMA,
        "annotations": {"readOnlyHint": False, "destructiveHint": False},
    },
]


def journal(line: str) -> None:
    with open(JOURNAL, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def answer(msg_id: object, result: object = None, error: object = None) -> None:
    body = {"jsonrpc": "2.0", "id": msg_id}
    body.update({"error": error} if error is not None else {"result": result})
    sys.stdout.write(json.dumps(body) + "\n")
    sys.stdout.flush()


def main() -> None:
    time.sleep(float(os.environ.get("CHAOS_START_DELAY_S", "0")))
    print(f"chaos server {os.getpid()} ready", file=sys.stderr, flush=True)
    for line in sys.stdin:
        msg = json.loads(line)
        method, msg_id = msg.get("method"), msg.get("id")
        if msg_id is None:
            continue
        if method == "initialize":
            answer(
                msg_id,
                {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "chaos", "version": "1"},
                },
            )
        elif method == "tools/list":
            answer(msg_id, {"tools": TOOLS})
        elif method == "tools/call":
            name, args = msg["params"]["name"], msg["params"].get("arguments") or {}
            journal(f"start {name} {args['id']} {os.getpid()}")
            time.sleep(random.uniform(0.0, 0.04))
            if name == "record":
                journal(f"effect {args['id']}")
            time.sleep(0.2)
            answer(msg_id, {"content": [{"type": "text", "text": f"{name} {args['id']} done"}]})
        else:
            answer(msg_id, error={"code": -32601, "message": f"method not found: {method}"})


if __name__ == "__main__":
    main()
