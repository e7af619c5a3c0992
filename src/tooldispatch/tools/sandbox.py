"""File tools confined to one workspace folder: ``read_file`` and ``list_dir``.

Every path is taken relative to the workspace and opened one component at a time from the workspace
folder's own descriptor (``openat`` with ``O_NOFOLLOW``), following symlinks by reading them and walking
their targets the same way. ``..`` that climbs out, absolute paths and symlinks pointing outside are all
refused with a :class:`ToolError` that says so, and since nothing is opened by a full path, no component
can be swapped for a symlink between a check and the open. The last component is opened non-blocking, so
a FIFO is refused instead of blocking. Every OS error becomes a ``ToolError``; reads stop at a size limit.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tooldispatch.errors import ConfigError, ToolError

if TYPE_CHECKING:
    from tooldispatch.dispatch import Registry

DEFAULT_MAX_BYTES = 256 * 1024
DEFAULT_MAX_ENTRIES = 1000
MAX_LINKS = 40
"""The most symlinks one path may go through (the kernel's own limit)."""

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
_LEAF_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC


def _refused(message: str) -> ToolError:
    return ToolError(message, retryable=False, status=403)


class Workspace:
    """A folder the file tools may read, and nothing outside it.

    Args:
        root: the workspace folder; it must exist.
        max_bytes: the most bytes ``read_file`` returns; longer files come back cut, with ``truncated``.
        max_entries: the most entries ``list_dir`` returns.

    Raises:
        ConfigError: ``root`` is not an existing directory.
    """

    def __init__(
        self, root: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES, max_entries: int = DEFAULT_MAX_ENTRIES
    ) -> None:
        real = Path(os.path.realpath(root))
        if not real.is_dir():
            raise ConfigError(f"workspace {str(root)!r} is not an existing directory; create it or pass another")
        if max_bytes < 1 or max_entries < 1:
            raise ConfigError("max_bytes and max_entries must be at least 1")
        self.root = real
        self.max_bytes = max_bytes
        self.max_entries = max_entries

    def _outside(self, path: str) -> ToolError:
        return _refused(f"{path!r} resolves outside the workspace; only files under the workspace can be read")

    def _open_beneath(self, path: str, *, want_dir: bool) -> tuple[int, list[str]]:
        """Open ``path`` one component at a time from the workspace's directory descriptor.

        Every component is opened relative to the descriptor of the directory before it, with
        ``O_NOFOLLOW``; a symlink met on the way is read and its target walked the same way (``..`` and
        absolute targets included), so what is opened is always beneath the root, whatever another process
        renames or swaps meanwhile. The last component is opened with ``O_NONBLOCK``, so a FIFO or a device
        never blocks the open.

        Returns:
            The open descriptor (the caller closes it) and the real path's components under the root.

        Raises:
            ToolError: the path is absolute, holds a NUL byte, leaves the workspace, or cannot be opened.
        """
        if "\x00" in path:
            raise _refused("the path contains a NUL byte; pass a plain relative path")
        if os.path.isabs(path):
            raise _refused(f"{path!r} is absolute; pass a path relative to the workspace, e.g. 'notes/todo.txt'")
        parts = _components(path)
        names: list[str] = []
        links = 0
        try:
            fds = [os.open(self.root, _DIR_FLAGS)]
        except OSError as exc:
            raise ToolError(f"cannot open the workspace: {exc.strerror}", retryable=False) from None
        try:
            while parts:
                part = parts.pop(0)
                if part == "..":
                    if not names:
                        raise self._outside(path)
                    os.close(fds.pop())
                    names.pop()
                    continue
                flags = _DIR_FLAGS if parts or want_dir else _LEAF_FLAGS
                try:
                    fds.append(os.open(part, flags, dir_fd=fds[-1]))
                    names.append(part)
                    continue
                except OSError as exc:
                    error = exc
                target = self._link_target(path, part, fds[-1], error, last=not parts, want_dir=want_dir)
                links += 1
                if links > MAX_LINKS:
                    raise ToolError(f"{path!r} goes through more than {MAX_LINKS} symlinks", retryable=False)
                if os.path.isabs(target):
                    inside = os.path.relpath(target, self.root)
                    if inside == ".." or inside.startswith("../") or target.startswith("//"):
                        raise self._outside(path)
                    while len(fds) > 1:
                        os.close(fds.pop())
                    names.clear()
                    target = inside
                parts = _components(target) + parts
            return fds.pop(), names
        finally:
            for fd in fds:
                os.close(fd)

    def _link_target(self, path: str, part: str, dir_fd: int, error: OSError, *, last: bool, want_dir: bool) -> str:
        """The target of ``part`` when it is a symlink; otherwise the ToolError that opening it deserves."""
        try:
            info = os.stat(part, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            if want_dir:
                raise ToolError(f"{path!r} is not a folder in the workspace", retryable=False, status=404) from None
            missing = f"no file {path!r} in the workspace; call list_dir to see what exists"
            raise ToolError(missing, retryable=False, status=404) from None
        except OSError as exc:
            raise ToolError(f"cannot open {path!r}: {exc.strerror}", retryable=False) from None
        if stat.S_ISLNK(info.st_mode):
            try:
                return os.readlink(part, dir_fd=dir_fd)
            except OSError as exc:
                raise ToolError(f"cannot open {path!r}: {exc.strerror}", retryable=False) from None
        if not stat.S_ISDIR(info.st_mode) and (want_dir or not last):
            raise ToolError(f"{path!r} is not a folder in the workspace", retryable=False, status=404)
        raise ToolError(f"cannot open {path!r}: {error.strerror}", retryable=False)

    def resolve(self, path: str) -> Path:
        """Return the real path of ``path`` inside the workspace.

        Args:
            path: a path relative to the workspace root (``"."`` is the root).

        Returns:
            The resolved absolute path, guaranteed to be inside the workspace at the time it was walked.

        Raises:
            ToolError: the path is absolute, contains a NUL byte, resolves outside the workspace, or does
                not exist.
        """
        fd, names = self._open_beneath(path, want_dir=False)
        os.close(fd)
        return self.root.joinpath(*names)

    def read_file(self, path: str) -> dict[str, Any]:
        """Read a UTF-8 text file from the workspace.

        Args:
            path: the file's path relative to the workspace, e.g. "notes/todo.txt".

        Returns:
            The path, the text (at most the size limit), the file's size in bytes and whether the
            text was cut.
        """
        fd, names = self._open_beneath(path, want_dir=False)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                if stat.S_ISDIR(info.st_mode):
                    raise ToolError(f"{path!r} is a directory; call list_dir on it", retryable=False, status=400)
                raise _refused(f"{path!r} is not a regular file")
            data = _read_up_to(fd, self.max_bytes + 1)
        except OSError as exc:
            raise ToolError(f"cannot read {path!r}: {exc.strerror}", retryable=False) from None
        finally:
            os.close(fd)
        truncated = len(data) > self.max_bytes
        data = data[: self.max_bytes]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            if not truncated or exc.start < len(data) - 3:
                raise ToolError(f"{path!r} is not UTF-8 text; only text files can be read", retryable=False) from None
            text = data[: exc.start].decode("utf-8")
        return {"path": "/".join(names) or ".", "content": text, "size": info.st_size, "truncated": truncated}

    def list_dir(self, path: str = ".") -> dict[str, Any]:
        """List a folder of the workspace.

        Args:
            path: the folder's path relative to the workspace; the workspace root when omitted.

        Returns:
            The folder's path and its entries (name, kind "file" | "dir" | "link" | "other", size in
            bytes for files), sorted by name, and whether the list was cut at the limit.
        """
        fd, names = self._open_beneath(path, want_dir=True)
        entries: list[dict[str, Any]] = []
        try:
            listed = sorted(os.listdir(fd))
            for name in listed[: self.max_entries]:
                try:
                    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:  # removed since it was listed
                    continue
                if stat.S_ISLNK(info.st_mode):
                    kind = "link"
                elif stat.S_ISDIR(info.st_mode):
                    kind = "dir"
                elif stat.S_ISREG(info.st_mode):
                    kind = "file"
                else:
                    kind = "other"
                entry: dict[str, Any] = {"name": name, "kind": kind}
                if kind == "file":
                    entry["size"] = info.st_size
                entries.append(entry)
        except OSError as exc:
            raise ToolError(f"cannot list {path!r}: {exc.strerror}", retryable=False) from None
        finally:
            os.close(fd)
        return {"path": "/".join(names) or ".", "entries": entries, "truncated": len(listed) > self.max_entries}


def _components(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


def _read_up_to(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while size < limit:
        chunk = os.read(fd, min(limit - size, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def register_workspace(registry: Registry, workspace: Workspace) -> Registry:
    """Register ``read_file`` and ``list_dir`` over ``workspace`` as read-only, concurrency-safe tools.

    Args:
        registry: where to register them.
        workspace: the folder they are confined to.

    Returns:
        The same registry.
    """
    for name in ("read_file", "list_dir"):
        registry.register(
            name,
            getattr(workspace, name),
            read_only=True,
            concurrency_safe=True,
            source="tooldispatch.tools.sandbox",
            version="1",
            timeout_s=10,
        )
    return registry
