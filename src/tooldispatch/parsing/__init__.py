"""Turning raw model output into tool calls: reasoning split, strict formats, fallback, streaming."""
