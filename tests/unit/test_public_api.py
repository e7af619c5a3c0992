"""The public API is exactly ``__all__``, and every name in it resolves."""

import tooldispatch

EXPECTED = {
    "Agent",
    "AgentRun",
    "Backend",
    "BackendError",
    "BackendUnavailable",
    "Budget",
    "Candidate",
    "ChatRequest",
    "ConfigError",
    "DispatchResult",
    "DispatchTrace",
    "Dispatcher",
    "ManualClock",
    "MetricsReport",
    "ModelNotFoundError",
    "ModelOutputError",
    "OpenAICompatBackend",
    "ParseOutcome",
    "PendingApproval",
    "ProviderError",
    "RateLimited",
    "RegistrationError",
    "Registry",
    "Repair",
    "RepairResult",
    "ScriptedBackend",
    "ScriptedTurn",
    "StreamParser",
    "ToolCall",
    "ToolDef",
    "ToolError",
    "ToolSources",
    "ToolSpec",
    "ToolTimeout",
    "TooldispatchError",
    "backend_from_profile",
    "load_profile",
    "load_sources",
    "normalize_tools",
    "parse_tool_calls",
    "repair_call",
    "resolve_name",
}


def test_all_is_pinned() -> None:
    """``__all__`` lists exactly the supported names; adding or removing one is a deliberate change."""
    assert set(tooldispatch.__all__) == EXPECTED


def test_every_public_name_resolves() -> None:
    """Each name in ``__all__`` imports and is not None."""
    for name in tooldispatch.__all__:
        assert getattr(tooldispatch, name) is not None, name


def test_unknown_name_raises_attribute_error() -> None:
    """A name outside the API raises AttributeError, as for any module."""
    try:
        tooldispatch.does_not_exist  # noqa: B018
    except AttributeError as exc:
        assert "does_not_exist" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_all_matches_lazy_exports() -> None:
    """Every name in ``__all__`` has a lazy import entry and no entry is unlisted."""
    assert set(tooldispatch.__all__) == set(tooldispatch._EXPORTS)
