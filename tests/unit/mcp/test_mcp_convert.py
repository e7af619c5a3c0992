"""MCP annotations to registry metadata, results to JSON values, errors to the retry policy's terms."""

from __future__ import annotations

import mcp_types as types
import pytest

from tooldispatch.dispatch.retry import is_permanent
from tooldispatch.errors import ToolError
from tooldispatch.mcp.config import parse_config
from tooldispatch.mcp.convert import metadata, protocol_error, result_value


def _server(**extra: object) -> object:
    return parse_config({"mcpServers": {"s": {"command": "x", **extra}}})[0]


def test_absent_annotations_leave_the_conservative_default() -> None:
    """No annotations: every property stays undeclared (side-effecting, no parallelism), with the server's timeout."""
    kw, note = metadata(_server(timeout_s=7), "t", None)  # type: ignore[arg-type]
    assert kw == {"timeout_s": 7.0}
    assert note == ""


def test_untrusted_annotations_only_add_caution() -> None:
    """Untrusted: destructiveHint=true marks the tool destructive; readOnlyHint is ignored and said so."""
    server = _server()
    assert metadata(server, "t", {"destructiveHint": True}) == ({"destructive": True, "timeout_s": 30.0}, "")  # type: ignore[arg-type]
    assert metadata(server, "t", {"readOnlyHint": True}) == ({"timeout_s": 30.0}, "annotations ignored (untrusted)")  # type: ignore[arg-type]
    assert metadata(server, "t", {"destructiveHint": False}) == (
        {"timeout_s": 30.0},
        "annotations ignored (untrusted)",
    )  # type: ignore[arg-type]


def test_trusted_annotations_lower_caution_and_say_so() -> None:
    """trust=annotations: readOnlyHint makes a read-only, parallel-safe tool; destructiveHint=false is taken as said."""
    server = _server(trust="annotations")
    assert metadata(server, "t", {"readOnlyHint": True, "idempotentHint": True}) == (  # type: ignore[arg-type]
        {"read_only": True, "concurrency_safe": True, "timeout_s": 30.0},
        "read-only (readOnlyHint, trusted)",
    )
    assert metadata(server, "t", {"readOnlyHint": False, "destructiveHint": False}) == (  # type: ignore[arg-type]
        {"destructive": False, "timeout_s": 30.0},
        "not destructive (destructiveHint: false, trusted)",
    )


def test_declarations_in_the_config_win_over_annotations() -> None:
    """A person's own declaration overrides the server's hint (a destructive hint dropped for a declared read-only)."""
    server = _server(tools={"t": {"read_only": True, "quota": {"limit": 2}, "timeout_s": 3}})
    kw, _ = metadata(server, "t", {"destructiveHint": True})  # type: ignore[arg-type]
    assert kw == {"read_only": True, "quota": {"limit": 2}, "timeout_s": 3}


def test_results_keep_structured_content_and_read_text() -> None:
    """Structured content is the value; one text block is its text; several blocks are their JSON forms."""
    structured = types.CallToolResult(content=[types.TextContent(text="21 C")], structured_content={"c": 21})
    assert result_value(structured) == {"c": 21}
    assert result_value(types.CallToolResult(content=[types.TextContent(text="hi")])) == "hi"
    two = types.CallToolResult(content=[types.TextContent(text="a"), types.TextContent(text="b")])
    assert result_value(two) == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]


def test_is_error_results_are_permanent_tool_errors() -> None:
    """isError becomes a ToolError the retry policy never repeats, carrying the server's text."""
    with pytest.raises(ToolError) as err:
        result_value(types.CallToolResult(content=[types.TextContent(text="no such record")], is_error=True))
    assert str(err.value) == "no such record"
    assert is_permanent(err.value)


@pytest.mark.parametrize(
    ("code", "status", "permanent"), [(-32602, 400, True), (-32601, 404, True), (-32603, None, False)]
)
def test_protocol_errors_map_to_statuses(code: int, status: int | None, permanent: bool) -> None:
    """Invalid params and unknown methods are permanent refusals; other JSON-RPC errors may be retried if read-only."""
    error = protocol_error("s", code, "boom")
    assert str(error) == f"MCP server 's' answered error {code}: boom"
    assert (error.status, is_permanent(error)) == (status, permanent)
