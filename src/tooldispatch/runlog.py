"""The log of agent runs started from the command line (table ``cli_runs``, migration ``cli_0001_runs``).

``tooldispatch run`` and ``chat`` keep one row per run in the store (the per-user home's by default), with
what ``tooldispatch logs`` shows (task, model, profile, how it ended, calls, repairs, time), what
``chat -c`` needs to continue the conversation (the messages, the session, the world) and what
``approvals approve`` needs to run a suspended call on the run's own tools (the tool sources and the demo
world's file).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tooldispatch.errors import ConfigError

if TYPE_CHECKING:
    from tooldispatch.agent.records import AgentRun
    from tooldispatch.store import StateStore

_COLUMNS = (
    "id, session_id, parent_id, started_at, command, task, model, profile, end_reason, exit_code, calls, repairs, "
    "rejected, pending, wall_s, sources, world, settings, final_answer, messages, transcript"
)


@dataclass(slots=True)
class RunRecord:
    """One kept run."""

    session_id: str
    command: str
    task: str
    model: str
    profile: str
    end_reason: str
    exit_code: int
    calls: int = 0
    repairs: int = 0
    rejected: int = 0
    pending: int = 0
    wall_s: float = 0.0
    sources: dict[str, Any] = field(default_factory=dict)
    world: str = ""
    settings: dict[str, Any] = field(default_factory=dict)
    final_answer: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)
    transcript: dict[str, Any] = field(default_factory=dict)
    parent_id: str | None = None
    started_at: float = field(default_factory=time.time)
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def conversation(self) -> list[dict[str, Any]]:
        """The messages to continue from: the run's conversation with its final answer appended."""
        out = list(self.messages)
        if self.final_answer:
            out.append({"role": "assistant", "content": self.final_answer})
        return out

    def summary(self) -> dict[str, Any]:
        """What ``tooldispatch logs --json`` prints for the run (no messages, no transcript)."""
        return {
            "id": self.id,
            "session_id": self.session_id,
            "parent_id": self.parent_id,
            "started_at": self.started_at,
            "command": self.command,
            "task": self.task,
            "model": self.model,
            "profile": self.profile,
            "end": self.end_reason,
            "exit_code": self.exit_code,
            "calls": self.calls,
            "repairs": self.repairs,
            "rejected": self.rejected,
            "pending": self.pending,
            "wall_s": round(self.wall_s, 3),
            "sources": self.sources,
            "world": self.world,
            "settings": self.settings,
            "final_answer": self.final_answer,
        }


def record_of(run: AgentRun, **fields: Any) -> RunRecord:
    """A record of ``run``: its counts, conversation and transcript, plus the given fields."""
    runs = run.tool_runs
    return RunRecord(
        end_reason=run.end,
        calls=sum(1 for r in runs if "auto_refresh" not in r.call.flags),
        repairs=sum(len(c.repairs) for t in run.turns for c in t.outcome.calls),
        rejected=sum(1 for t in run.turns for c in t.outcome.candidates if not c.accepted),
        pending=sum(1 for r in runs if r.result.status == "awaiting_approval"),
        wall_s=run.wall_s,
        final_answer=run.final_answer,
        messages=list(run.messages),
        transcript=run.to_dict(),
        **fields,
    )


def save(store: StateStore, record: RunRecord) -> None:
    """Keep ``record`` (one row; an id already kept is replaced)."""
    values = (
        record.id,
        record.session_id,
        record.parent_id,
        record.started_at,
        record.command,
        record.task,
        record.model,
        record.profile,
        record.end_reason,
        record.exit_code,
        record.calls,
        record.repairs,
        record.rejected,
        record.pending,
        record.wall_s,
        json.dumps(record.sources),
        record.world,
        json.dumps(record.settings),
        record.final_answer,
        json.dumps(record.messages, ensure_ascii=False, default=str),
        json.dumps(record.transcript, ensure_ascii=False, default=str),
    )
    with store.transaction() as conn:
        conn.execute("DELETE FROM cli_runs WHERE id = ?", [record.id])
        conn.execute(f"INSERT INTO cli_runs ({_COLUMNS}) VALUES ({', '.join('?' * len(values))})", list(values))


def _record(row: tuple[Any, ...]) -> RunRecord:
    d = dict(zip([c.strip() for c in _COLUMNS.split(",")], row, strict=True))
    return RunRecord(
        id=d["id"],
        session_id=d["session_id"],
        parent_id=d["parent_id"],
        started_at=float(d["started_at"]),
        command=d["command"],
        task=d["task"],
        model=d["model"],
        profile=d["profile"],
        end_reason=d["end_reason"],
        exit_code=int(d["exit_code"]),
        calls=int(d["calls"]),
        repairs=int(d["repairs"]),
        rejected=int(d["rejected"]),
        pending=int(d["pending"]),
        wall_s=float(d["wall_s"]),
        sources=json.loads(d["sources"]),
        world=d["world"],
        settings=json.loads(d["settings"]),
        final_answer=d["final_answer"],
        messages=json.loads(d["messages"]),
        transcript=json.loads(d["transcript"]),
    )


def _has_table(store: StateStore) -> bool:
    return store.fetchone("SELECT 1 FROM schema_migrations WHERE name = 'cli_0001_runs'") is not None


def recent(store: StateStore, limit: int = 10) -> list[RunRecord]:
    """The ``limit`` most recent runs, newest first."""
    if not _has_table(store):
        return []
    rows = store.fetchall(f"SELECT {_COLUMNS} FROM cli_runs ORDER BY started_at DESC, id LIMIT ?", [limit])
    return [_record(tuple(r)) for r in rows]


def get(store: StateStore, run_id: str) -> RunRecord:
    """The run whose id starts with ``run_id``.

    Raises:
        ConfigError: no run, or more than one, has that id prefix (the message says what to do).
    """
    if not run_id or any(c not in "0123456789abcdef" for c in run_id):
        raise ConfigError(f"{run_id!r} is not a run id; ids are hexadecimal, as 'tooldispatch logs' shows")
    rows = (
        store.fetchall(f"SELECT {_COLUMNS} FROM cli_runs WHERE id LIKE ? ORDER BY id LIMIT 2", [run_id + "%"])
        if _has_table(store)
        else []
    )
    if not rows:
        raise ConfigError(f"no run {run_id!r}; 'tooldispatch logs' lists the kept runs")
    if len(rows) > 1:
        raise ConfigError(f"{run_id!r} matches more than one run; give more characters of the id")
    return _record(tuple(rows[0]))


def latest_of_session(store: StateStore, session_id: str) -> RunRecord | None:
    """The session's most recent run, or ``None``."""
    if not _has_table(store):
        return None
    row = store.fetchone(
        f"SELECT {_COLUMNS} FROM cli_runs WHERE session_id = ? ORDER BY started_at DESC LIMIT 1", [session_id]
    )
    return _record(tuple(row)) if row else None


def sources_of(record: RunRecord) -> tuple[list[str], list[str]]:
    """The tool targets and MCP config files the run loaded, to load them again."""
    src: Mapping[str, Any] = record.sources
    return [str(t) for t in src.get("tools", [])], [str(m) for m in src.get("mcp", [])]
