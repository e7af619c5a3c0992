"""Item "no tracebacks, no silent emptiness": every command, given bad input, says what to fix in one line."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Cli = Callable[..., Any]  # the `cli` fixture of conftest.py

TOOLS = '[{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]'


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder holding files of the wrong kind, empty files and an unrelated SQLite database."""
    (tmp_path / "some.toml").write_text("a = 1\n")
    (tmp_path / "bad.jsonl").write_text('{"x": 1}\n')
    (tmp_path / "notjson.jsonl").write_text("not json\n")
    (tmp_path / "empty.jsonl").write_text("")
    (tmp_path / "empty.json").write_text("")
    (tmp_path / "tools.json").write_text(TOOLS)
    (tmp_path / "binary.jsonl").write_bytes(b"\xff\xfe\x00bad")
    db = sqlite3.connect(tmp_path / "other.db")
    db.execute("CREATE TABLE t (x INTEGER)")
    db.commit()
    db.close()
    monkeypatch.chdir(tmp_path)
    return tmp_path


# (arguments, stdin, exit code, a fragment of the one line)
BAD = [
    (["run", "x", "--parse", "bogus"], "", 2, "unknown --parse 'bogus'; use server or client"),
    (["run", "x", "--profile", "nope"], "", 2, "no profile 'nope'"),
    (["run"], "", 2, "Missing argument 'TASK'; see 'tooldispatch run --help'"),
    (["run", "x", "--max-turns", "many"], "", 2, "Invalid value for '--max-turns': Input should be a valid integer"),
    (["chat", "--profile", "nope"], "", 2, "no profile 'nope'"),
    (["demo", "--task", "nope"], "", 2, "unknown demo task 'nope'"),
    (["parse", "--tools", "missing.json"], "x", 2, "tools file 'missing.json' does not exist"),
    (["parse", "--tools", "some.toml"], "x", 2, "tools file 'some.toml' is not valid JSON"),
    (["parse", "--tools", "empty.json"], "x", 2, "tools file 'empty.json' is not valid JSON"),
    (["parse", "--tools", "tools.json", "--repair", "bogus"], "x", 2, "unknown --repair 'bogus'"),
    (["bench", "replay", "some.toml"], "", 2, "some.toml line 1 is not JSON"),
    (["bench", "replay", "missing.jsonl"], "", 2, "no corpus at missing.jsonl"),
    (["bench", "replay", "empty.jsonl"], "", 2, "empty.jsonl holds no BFCL outputs to score"),
    (["bench", "replay", "bad.jsonl"], "", 2, "bad.jsonl line 1 is not a benchmark output record"),
    (["bench", "replay", "binary.jsonl"], "", 2, "binary.jsonl is not a text file"),
    (["bench", "bfcl", "--constrained", "bogus"], "", 2, "'bogus': use off, on or required"),
    (["bench", "suite", "--constrained", "bogus"], "", 2, "'bogus': use off, on or required"),
    (["bench", "cli-startup", "--rounds", "0"], "", 2, "Invalid value for '--rounds'"),
    (["report", "bad.jsonl"], "", 2, "bad.jsonl line 1 is not a benchmark output record"),
    (["report", "notjson.jsonl"], "", 2, "notjson.jsonl line 1 is not JSON"),
    (["report", "empty.jsonl"], "", 2, "empty.jsonl holds no benchmark outputs to report"),
    (["report", "other.db"], "", 2, "other.db is a SQLite file without proxied requests"),
    (["store", "check", "--store", "other.db"], "", 2, "other.db is not a tooldispatch state store (it holds other"),
    (["store", "migrate", "--store", "other.db"], "", 2, "other.db is not a tooldispatch state store (it holds other"),
    (["report", "missing"], "", 2, "missing is neither a run folder with bench.db nor a corpus file"),
    (["trace", "list", "--store", "missing.db"], "", 2, "no state file at missing.db"),
    (["trace", "list", "--store", "other.db"], "", 2, "other.db is not a tooldispatch state store"),
    (["trace", "list", "--limit", "0"], "", 2, "Invalid value for '--limit'"),
    (["approvals", "list", "--store", "other.db"], "", 2, "other.db is not a tooldispatch state store"),
    (["approvals", "approve", "a_1", "--store", "missing.db", "--tools", "demo"], "", 2, "no state file"),
    (["models", "info", "missing.gguf"], "", 1, "no model file at missing.gguf"),
    (["models", "info", "some.toml"], "", 1, "some.toml is not a usable GGUF file"),
    (["models", "pull", "nope@Q1"], "", 1, "no model manifest 'nope'"),
    (["serve", "--profile", "nope", "--dry-run"], "", 2, "no profile 'nope'"),
    (["proxy", "stats", "--store", "other.db"], "", 2, "other.db is not a tooldispatch state store"),
    (["proxy", "stats", "--store", "missing.db"], "", 2, "no state file at missing.db"),
    (["mcp", "serve", "--mcp", "missing.json"], "", 2, "--mcp missing.json: cannot read the file"),
    (["nope"], "", 2, "No such command 'nope'"),
]


@pytest.mark.parametrize(("args", "stdin", "code", "fragment"), BAD, ids=[" ".join(row[0]) for row in BAD])
def test_bad_input_is_one_line_and_a_nonzero_exit(
    cli: Cli, folder: Path, args: list[str], stdin: str, code: int, fragment: str
) -> None:
    """The command exits with its documented code and prints exactly one `error:` line naming the fault."""
    ran = cli(*args, stdin=stdin)
    assert ran.code == code, ran.err
    lines = ran.err.splitlines()
    assert len(lines) == 1, ran.err
    assert lines[0].startswith("error: ")
    assert fragment in lines[0]
    assert "Traceback" not in ran.out + ran.err


def test_report_on_an_unrelated_sqlite_file_leaves_it_untouched(cli: Cli, folder: Path) -> None:
    """`report` on a foreign SQLite file changes neither its bytes nor its mtime, and writes no report."""
    db = folder / "other.db"
    os.utime(db, (1_000_000_000, 1_000_000_000))
    before = db.read_bytes()
    ran = cli("report", str(db))
    assert ran.code == 2
    assert db.stat().st_mtime == 1_000_000_000
    assert db.read_bytes() == before
    assert not (folder / "report").exists()


def test_proxy_stats_does_not_migrate_a_foreign_database(cli: Cli, folder: Path) -> None:
    """`proxy stats` opens the store read-only: a foreign database gains no tooldispatch tables."""
    ran = cli("proxy", "stats", "--store", "other.db")
    assert ran.code == 2
    tables = sqlite3.connect(folder / "other.db").execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("t",)]


def test_store_migrate_never_adds_the_schema_to_a_foreign_database(cli: Cli, folder: Path) -> None:
    """`store migrate` and a run's `--store` refuse a SQLite file holding another program's tables, unchanged."""
    assert cli("store", "migrate", "--store", "other.db").code == 2
    assert cli("trace", "list", "--store", "other.db").code == 2
    tables = sqlite3.connect(folder / "other.db").execute("SELECT name FROM sqlite_master").fetchall()
    assert tables == [("t",)]


def test_an_unexpected_exception_is_one_line_with_exit_70(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug (an exception that is not tooldispatch's own) prints one line naming TOOLDISPATCH_DEBUG, exit 70."""
    import tooldispatch.cli as cli_module

    class Broken:
        def main(self, args: object, prog_name: str, standalone_mode: bool) -> None:
            raise KeyError("boom")

    monkeypatch.setattr(cli_module, "command", Broken)
    monkeypatch.delenv("TOOLDISPATCH_DEBUG", raising=False)
    ran = cli("anything")
    assert ran.code == 70
    assert ran.err == (
        "error: unexpected KeyError: 'boom' (a bug in tooldispatch; TOOLDISPATCH_DEBUG=1 shows the traceback to "
        "report)\n"
    )
