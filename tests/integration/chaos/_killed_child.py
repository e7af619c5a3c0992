"""Child process for the kill test: dispatches one ``charge`` that holds mid-call until it is killed.

Usage: python _killed_child.py STORE WORLD MARKER HOLD (the script's folder is on sys.path, so _chaos_tools imports).
"""

from __future__ import annotations

import sys
from pathlib import Path

from _chaos_tools import charge_registry

from tooldispatch.dispatch import Dispatcher
from tooldispatch.tools.demo import DemoWorld


def main() -> None:
    store, world_path, marker, hold = sys.argv[1:5]
    world = DemoWorld(world_path)
    dispatcher = Dispatcher(charge_registry(world, marker=Path(marker), hold=hold), store=store)
    dispatcher.dispatch("charge", {"order_id": "o-101"}, session_id="s1")
    raise SystemExit("the charge returned; the test expected this process to be killed first")


if __name__ == "__main__":
    main()
