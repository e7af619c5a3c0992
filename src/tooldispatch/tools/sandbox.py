"""File tools confined to one workspace folder: ``read_file`` and ``list_dir``.

Every path is taken relative to the workspace, resolved to its real location (following every
symlink) and refused unless that location is inside the workspace's own real path. ``..`` that climbs
out, absolute paths and symlinks pointing outside are all refused with a :class:`ToolError` that says
so. Reads open the resolved path with ``O_NOFOLLOW``, so the final component cannot be swapped for a
symlink between the check and the open, and stop at a size limit.
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

    def resolve(self, path: str) -> Path:
        """Return the real path of ``path`` inside the workspace.

        Args:
            path: a path relative to the workspace root (``"."`` is the root).

        Returns:
            The resolved absolute path, guaranteed to be inside the workspace.

        Raises:
            ToolError: the path is absolute, contains a NUL byte, or resolves outside the workspace.
        """
        if "\x00" in path:
            raise _refused("the path contains a NUL byte; pass a plain relative path")
        if os.path.isabs(path):
            raise _refused(f"{path!r} is absolute; pass a path relative to the workspace, e.g. 'notes/todo.txt'")
        real = Path(os.path.realpath(self.root / path))
        if real != self.root and self.root not in real.parents:
            raise _refused(f"{path!r} resolves outside the workspace; only files under the workspace can be read")
        return real

    def _display(self, real: Path) -> str:
        rel = real.relative_to(self.root).as_posix()
        return rel or "."

    def read_file(self, path: str) -> dict[str, Any]:
        """Read a UTF-8 text file from the workspace.

        Args:
            path: the file's path relative to the workspace, e.g. "notes/todo.txt".

        Returns:
            The path, the text (at most the size limit), the file's size in bytes and whether the
            text was cut.
        """
        real = self.resolve(path)
        try:
            fd = os.open(real, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            missing = f"no file {path!r} in the workspace; call list_dir to see what exists"
            raise ToolError(missing, retryable=False, status=404) from None
        except OSError as exc:
            raise ToolError(f"cannot open {path!r}: {exc.strerror}", retryable=False) from exc
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            if stat.S_ISDIR(info.st_mode):
                raise ToolError(f"{path!r} is a directory; call list_dir on it", retryable=False, status=400)
            raise _refused(f"{path!r} is not a regular file")
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(self.max_bytes + 1)
        truncated = len(data) > self.max_bytes
        data = data[: self.max_bytes]
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            if not truncated or exc.start < len(data) - 3:
                raise ToolError(f"{path!r} is not UTF-8 text; only text files can be read", retryable=False) from None
            text = data[: exc.start].decode("utf-8")
        return {"path": self._display(real), "content": text, "size": info.st_size, "truncated": truncated}

    def list_dir(self, path: str = ".") -> dict[str, Any]:
        """List a folder of the workspace.

        Args:
            path: the folder's path relative to the workspace; the workspace root when omitted.

        Returns:
            The folder's path and its entries (name, kind "file" | "dir" | "link" | "other", size in
            bytes for files), sorted by name, and whether the list was cut at the limit.
        """
        real = self.resolve(path)
        if not real.is_dir():
            raise ToolError(f"{path!r} is not a folder in the workspace", retryable=False, status=404)
        entries: list[dict[str, Any]] = []
        names = sorted(os.listdir(real))
        for name in names[: self.max_entries]:
            info = os.lstat(real / name)
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
        return {"path": self._display(real), "entries": entries, "truncated": len(names) > self.max_entries}


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
