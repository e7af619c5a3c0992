"""The demo world in a SQLite file: state survives reopening and is shared between connections."""

from __future__ import annotations

from pathlib import Path

import pytest

from tooldispatch.tools.demo import DemoWorld

pytestmark = pytest.mark.integration


def test_seed_file_is_not_reseeded(tmp_path: Path) -> None:
    """Seeding an existing file keeps its state instead of adding a second layout."""
    path = tmp_path / "world.db"
    first = DemoWorld.seed(path)
    first.assign_driver("d-north-1", "o-101")
    first.close()
    again = DemoWorld.seed(path)
    assert again.get_order("o-101")["status"] == "assigned"
    assert len(again.list_orders()["orders"]) == 9
    assert again.count_effects("assign_driver") == 1


def test_two_connections_see_each_other(tmp_path: Path) -> None:
    """A second world object on the same file sees the first one's effects at once."""
    path = tmp_path / "world.db"
    a = DemoWorld.seed(path)
    b = DemoWorld(path)
    a.send_message("c-101", "hi", "there")
    assert b.count_effects("send_message") == 1
    assert b.outbox() == [{"id": 1, "to": "c-101", "subject": "hi", "body": "there"}]
