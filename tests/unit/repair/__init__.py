"""Unit tests of schema-guided repair."""
