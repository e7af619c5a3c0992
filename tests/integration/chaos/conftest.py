"""Fixtures for the chaos tests: a demo world file, misbehaving tools, a dispatcher with a store file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _chaos_tools import Chaos, Rig, no_sleep

from tooldispatch.dispatch import Dispatcher, Registry
from tooldispatch.tools.demo import DemoWorld

T = 0.05  # timeout for tools that hang


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    world_path = tmp_path / "world.db"
    world = DemoWorld.seed(world_path)
    chaos = Chaos(world)
    reg = Registry()
    se = {"read_only": False, "destructive": False}
    ro = {"read_only": True, "concurrency_safe": True}
    reg.register("hang_after_effect", chaos.hang_after_effect, timeout_s=T, **se)
    reg.register("hang_read", chaos.hang_read, timeout_s=T, max_attempts=3, **ro)
    reg.register("hang_async", chaos.hang_async, timeout_s=T, max_attempts=1, **ro)
    reg.register("crash", chaos.crash, **se)
    reg.register("crash_read", chaos.crash, max_attempts=3, **ro)
    reg.register("flaky_read", chaos.flaky_read, max_attempts=3, **ro)
    reg.register("flaky_read_short", chaos.flaky_read, max_attempts=2, **ro)
    reg.register("refused_then_write", chaos.refused_then_write, max_attempts=3, **se)
    reg.register("flaky_write", chaos.flaky_write, max_attempts=3, **se)
    reg.register("effect_then_raise", chaos.effect_then_raise, max_attempts=3, **se)
    reg.register("huge", chaos.huge, result_max_chars=2000, **ro)
    reg.register("not_json", chaos.not_json, **se)
    reg.register("nan_read", chaos.nan_read, **ro)
    dispatcher = Dispatcher(reg, store=tmp_path / "state.db", sleep=no_sleep)
    yield Rig(world, chaos, dispatcher, world_path)
    chaos.release.set()
    dispatcher.close()
