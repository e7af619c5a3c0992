"""A short, bounded run of ``tooldispatch bench proxy``: both paths answer, and the soak loses nothing."""

from __future__ import annotations

import pytest

from tooldispatch.bench.proxy import run_bench

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def test_short_bench_measures_both_paths_and_loses_no_stream() -> None:
    """Every request is measured on both paths; 4 streams for 2 s through the proxy are all exact."""
    bench = run_bench(requests=10, streams=4, soak_s=2.0)
    assert len(bench.direct_ms) == len(bench.proxied_ms) == 10
    assert len(bench.direct_ttft_ms) == len(bench.proxied_ttft_ms) == 10
    assert bench.soak is not None
    assert (bench.soak.lost, bench.soak.corrupted, bench.soak.errors) == (0, 0, [])
    assert bench.soak.completed >= 4
    assert len(bench.soak.rss_mb) >= 2
