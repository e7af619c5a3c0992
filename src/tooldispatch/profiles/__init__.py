"""Deployment profiles (shipped in ``data/profiles/``, a user's own in ``~/.config/tooldispatch/profiles/``):
which backend, which server, launched how.

``load_profile`` reads and checks a profile, ``plan_launch`` turns it into the exact server command
(``tooldispatch serve --dry-run`` prints it), ``start_server`` / ``wait_until_ready`` run it, and
``backend_from_profile`` builds the matching backend.
"""

from __future__ import annotations

from tooldispatch.profiles.factory import backend_from_profile, client_base_url, tool_format_for
from tooldispatch.profiles.launch import (
    LaunchPlan,
    models_answer,
    plan_launch,
    start_server,
    stop_server,
    tail,
    wait_until_ready,
)
from tooldispatch.profiles.schema import (
    ClientSpec,
    Launcher,
    Profile,
    ServerSpec,
    list_profiles,
    load_profile,
    parse_profile,
    profile_entries,
    profiles_dir,
)

DEFAULT_PROFILE = "cpu-llamacpp"

__all__ = [
    "DEFAULT_PROFILE",
    "ClientSpec",
    "LaunchPlan",
    "Launcher",
    "Profile",
    "ServerSpec",
    "backend_from_profile",
    "client_base_url",
    "list_profiles",
    "load_profile",
    "models_answer",
    "parse_profile",
    "plan_launch",
    "profile_entries",
    "profiles_dir",
    "start_server",
    "stop_server",
    "tail",
    "tool_format_for",
    "wait_until_ready",
]
