"""Benchmarks: BFCL and the project's own suites across backend × model × quantization, with reports."""
