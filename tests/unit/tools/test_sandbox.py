"""read_file / list_dir stay inside their workspace folder."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from tooldispatch.errors import ConfigError, ToolError
from tooldispatch.tools.sandbox import Workspace


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "ws"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "todo.txt").write_text("buy milk\n", encoding="utf-8")
    (root / "hello.txt").write_text("hi", encoding="utf-8")
    outside = tmp_path / "secret.txt"
    outside.write_text("top secret", encoding="utf-8")
    return root, outside


def test_read_file_inside(layout: tuple[Path, Path]) -> None:
    """A file inside the workspace is read with its relative path and size."""
    ws = Workspace(layout[0])
    assert ws.read_file("notes/todo.txt") == {
        "path": "notes/todo.txt",
        "content": "buy milk\n",
        "size": 9,
        "truncated": False,
    }


def test_dotdot_that_stays_inside_is_fine(layout: tuple[Path, Path]) -> None:
    """A ``..`` that resolves back inside the workspace is allowed and reported by its real path."""
    ws = Workspace(layout[0])
    assert ws.read_file("notes/../hello.txt")["path"] == "hello.txt"


@pytest.mark.parametrize("path", ["../secret.txt", "notes/../../secret.txt", "./../ws/../secret.txt"])
def test_dotdot_escape_refused(layout: tuple[Path, Path], path: str) -> None:
    """A ``..`` that climbs out of the workspace is refused."""
    ws = Workspace(layout[0])
    with pytest.raises(ToolError) as info:
        ws.read_file(path)
    assert str(info.value) == f"{path!r} resolves outside the workspace; only files under the workspace can be read"
    assert info.value.status == 403
    assert info.value.retryable is False


def test_absolute_path_refused(layout: tuple[Path, Path]) -> None:
    """An absolute path is refused even when it points inside the workspace."""
    ws = Workspace(layout[0])
    inside = str(layout[0] / "hello.txt")
    with pytest.raises(ToolError, match=r"is absolute; pass a path relative to the workspace"):
        ws.read_file(inside)


def test_nul_byte_refused(layout: tuple[Path, Path]) -> None:
    """A path with a NUL byte is refused."""
    with pytest.raises(ToolError, match=r"^the path contains a NUL byte"):
        Workspace(layout[0]).read_file("hello.txt\x00.png")


def test_symlink_out_refused(layout: tuple[Path, Path]) -> None:
    """A symlink pointing outside the workspace cannot be read, nor listed through."""
    root, outside = layout
    os.symlink(outside, root / "leak.txt")
    os.symlink(outside.parent, root / "up")
    ws = Workspace(root)
    with pytest.raises(ToolError, match=r"^'leak.txt' resolves outside the workspace"):
        ws.read_file("leak.txt")
    with pytest.raises(ToolError, match=r"^'up' resolves outside the workspace"):
        ws.list_dir("up")
    with pytest.raises(ToolError, match=r"^'up/secret.txt' resolves outside the workspace"):
        ws.read_file("up/secret.txt")


def test_symlink_inside_followed(layout: tuple[Path, Path]) -> None:
    """A symlink to a file inside the workspace reads the target, named by its real path."""
    root, _ = layout
    os.symlink(root / "notes" / "todo.txt", root / "alias.txt")
    assert Workspace(root).read_file("alias.txt")["path"] == "notes/todo.txt"


def test_workspace_root_behind_symlink(tmp_path: Path, layout: tuple[Path, Path]) -> None:
    """A workspace given through a symlink is confined to its real folder."""
    root, _ = layout
    os.symlink(root, tmp_path / "link-to-ws")
    ws = Workspace(tmp_path / "link-to-ws")
    assert ws.read_file("hello.txt")["content"] == "hi"
    with pytest.raises(ToolError, match=r"resolves outside the workspace"):
        ws.read_file("../secret.txt")


def test_size_limit_truncates(layout: tuple[Path, Path]) -> None:
    """A file over the size limit comes back cut at the limit, with its full size."""
    root, _ = layout
    (root / "big.txt").write_text("a" * 100, encoding="utf-8")
    assert Workspace(root, max_bytes=10).read_file("big.txt") == {
        "path": "big.txt",
        "content": "a" * 10,
        "size": 100,
        "truncated": True,
    }


def test_truncation_never_splits_a_character(layout: tuple[Path, Path]) -> None:
    """Cutting inside a multi-byte character drops the partial character instead of failing."""
    root, _ = layout
    (root / "u.txt").write_text("ab€€", encoding="utf-8")  # € is 3 bytes
    assert Workspace(root, max_bytes=4).read_file("u.txt")["content"] == "ab"


def test_binary_refused(layout: tuple[Path, Path]) -> None:
    """A file that is not UTF-8 text is refused."""
    root, _ = layout
    (root / "b.bin").write_bytes(b"\xff\xfe\x00\x01")
    with pytest.raises(ToolError, match=r"^'b.bin' is not UTF-8 text"):
        Workspace(root).read_file("b.bin")


def test_missing_and_directory(layout: tuple[Path, Path]) -> None:
    """A missing file is a 404 pointing at list_dir; a folder passed to read_file says to list it."""
    ws = Workspace(layout[0])
    with pytest.raises(ToolError) as info:
        ws.read_file("nope.txt")
    assert str(info.value) == "no file 'nope.txt' in the workspace; call list_dir to see what exists"
    assert info.value.status == 404
    with pytest.raises(ToolError, match=r"^'notes' is a directory; call list_dir on it$"):
        ws.read_file("notes")


def test_list_dir(layout: tuple[Path, Path]) -> None:
    """list_dir gives sorted entries with kinds, file sizes, and marks symlinks as links."""
    root, outside = layout
    os.symlink(outside, root / "leak.txt")
    assert Workspace(root).list_dir() == {
        "path": ".",
        "entries": [
            {"name": "hello.txt", "kind": "file", "size": 2},
            {"name": "leak.txt", "kind": "link"},
            {"name": "notes", "kind": "dir"},
        ],
        "truncated": False,
    }
    assert Workspace(root, max_entries=1).list_dir(".")["truncated"] is True


def test_list_dir_escape_and_file(layout: tuple[Path, Path]) -> None:
    """list_dir refuses ``..`` out of the workspace and a path that is a file."""
    ws = Workspace(layout[0])
    with pytest.raises(ToolError, match=r"^'..' resolves outside the workspace"):
        ws.list_dir("..")
    with pytest.raises(ToolError, match=r"^'hello.txt' is not a folder in the workspace$"):
        ws.list_dir("hello.txt")


def test_bad_root(tmp_path: Path) -> None:
    """A workspace that is not an existing folder is a configuration error."""
    with pytest.raises(ConfigError, match=r"is not an existing directory"):
        Workspace(tmp_path / "missing")


def test_dispatched_escape_is_a_permanent_tool_error(layout: tuple[Path, Path]) -> None:
    """Through the dispatcher, an escape attempt is one attempt, not retried, and the model is told why."""
    from tooldispatch.dispatch import Dispatcher, Registry
    from tooldispatch.tools.sandbox import register_workspace

    d = Dispatcher(register_workspace(Registry(), Workspace(layout[0])), store=":memory:")
    result = d.dispatch("read_file", {"path": "../secret.txt"}, session_id="s")
    envelope = json.loads(result.content)
    assert (result.status, result.reason, result.trace.attempts) == ("error", "tool_error", 1)
    assert envelope["message"] == (
        "read_file failed: '../secret.txt' resolves outside the workspace; only files under the workspace can be "
        "read (status 403)"
    )
    listing = d.dispatch("list_dir", {}, session_id="s")
    assert [e["name"] for e in json.loads(listing.content)["entries"]] == ["hello.txt", "notes"]
    d.close()


def test_fault2_fifo_is_refused_without_blocking(layout: tuple[Path, Path]) -> None:
    """Fault 2: read_file on a FIFO inside the workspace is refused at once as not a regular file (through the
    dispatcher: a tool error on the first attempt, not a timeout that leaves the thread stuck in open)."""
    from tooldispatch.dispatch import Dispatcher, Registry

    root, _ = layout
    fifo = root / "pipe"
    os.mkfifo(fifo)
    registry = Registry()
    registry.register("read_file", Workspace(root).read_file, read_only=True, concurrency_safe=True, timeout_s=1)
    d = Dispatcher(registry, store=":memory:")
    try:
        result = d.dispatch("read_file", {"path": "pipe"}, session_id="s")
        assert (result.status, result.reason, result.trace.attempts, result.trace.possibly_running) == (
            "error",
            "tool_error",
            1,
            False,
        )
        assert json.loads(result.content)["message"] == ("read_file failed: 'pipe' is not a regular file (status 403)")
    finally:
        d.close()
        # Where a reader is blocked in open() (the fault), opening for writing releases it.
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


_SWAPPER = """
import os, sys
root, outside = sys.argv[1], sys.argv[2]
sub, real = os.path.join(root, "sub"), os.path.join(root, "sub.real")
print("ready", flush=True)
while True:
    os.rename(sub, real)
    os.symlink(outside, sub)
    os.unlink(sub)
    os.rename(real, sub)
"""


def test_directory_swapped_by_another_process_never_leaks(tmp_path: Path) -> None:
    """While another process swaps a directory of the workspace for a symlink to outside it, 3,000 reads
    of a file under it return the inside file or a ToolError: never the outside file, never a raw OS error."""
    import subprocess
    import sys

    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "secret.txt").write_text("inside", encoding="utf-8")
    outside = tmp_path / "out"
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE", encoding="utf-8")
    ws = Workspace(root)
    swapper = subprocess.Popen(
        [sys.executable, "-c", _SWAPPER, str(root), str(outside)], stdout=subprocess.PIPE, text=True
    )
    contents: list[str] = []
    raw_errors: list[str] = []
    try:
        assert swapper.stdout is not None and swapper.stdout.readline() == "ready\n"
        for _ in range(3000):
            try:
                contents.append(ws.read_file("sub/secret.txt")["content"])
            except ToolError:
                continue
            except Exception as exc:
                raw_errors.append(type(exc).__name__)
    finally:
        swapper.kill()
        swapper.wait()
    assert "OUTSIDE" not in contents
    assert raw_errors == []
    assert set(contents) <= {"inside"}


@pytest.mark.parametrize("at_open", [1, 2, 3])
def test_fault3_directory_swapped_for_a_symlink_at_each_open_never_leaks(tmp_path: Path, at_open: int) -> None:
    """Fault 3: a directory of the workspace swapped for a symlink to outside it just as the read makes its
    1st, 2nd or 3rd os.open call (after any check) yields the inside file or a ToolError, never the outside file."""
    import sys

    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "secret.txt").write_text("inside", encoding="utf-8")
    outside = tmp_path / "out"
    outside.mkdir()
    (outside / "secret.txt").write_text("OUTSIDE", encoding="utf-8")
    ws = Workspace(root)
    opens = [0]

    def swap_at_open(frame: Any, event: str, arg: Any) -> None:
        if event == "c_call" and arg is os.open:
            opens[0] += 1
            if opens[0] == at_open:
                os.rename(root / "sub", root / "sub.real")
                os.symlink(outside, root / "sub")

    sys.setprofile(swap_at_open)
    try:
        try:
            content: str | None = ws.read_file("sub/secret.txt")["content"]
        except ToolError:
            content = None
    finally:
        sys.setprofile(None)
    assert opens[0] >= at_open
    assert content in ("inside", None)
    if content is None:  # the walk met the symlink: it leads outside
        with pytest.raises(ToolError, match=r"^'sub/secret.txt' resolves outside the workspace"):
            ws.read_file("sub/secret.txt")
