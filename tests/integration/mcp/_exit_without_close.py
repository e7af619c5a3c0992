"""Loads the chaos server through McpServers, prints its pid, and exits without closing anything.

Usage: python _exit_without_close.py JOURNAL STATE_DB LOG_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

from tooldispatch.mcp.config import parse_config
from tooldispatch.mcp.source import McpServers
from tooldispatch.store import Store

journal, state, logs = sys.argv[1:4]
server = str(Path(__file__).with_name("_chaos_server.py"))
configs = parse_config({"mcpServers": {"chaos": {"command": sys.executable, "args": [server, journal]}}})
servers = McpServers(configs, store=Store(state), log_dir=logs)
print(servers.servers["chaos"].connection.pid, flush=True)
