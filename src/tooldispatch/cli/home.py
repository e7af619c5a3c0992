"""The per-user home: ``tooldispatch config`` and ``tooldispatch logs`` (filled in below)."""

from __future__ import annotations

import typer


def register(app: typer.Typer, bench: typer.Typer) -> None:
    """Add ``config`` and ``logs``."""
