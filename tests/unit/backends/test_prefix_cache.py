"""The prefix-state cache's bookkeeping: longest-prefix lookup, the byte bound, LRU order, superseded states."""

from __future__ import annotations

from array import array

import pytest

from tooldispatch.backends.prefix_cache import PrefixCache, SavedState, common_prefix, token_array


def _state(tokens: list[int], size: int) -> SavedState:
    return SavedState(tokens=array("i", tokens), data=None, size=size)


def test_common_prefix_counts_leading_shared_tokens() -> None:
    """The shared prefix length is exact at every position, including none and all."""
    a = token_array(list(range(100)))
    assert common_prefix(a, token_array(list(range(100)))) == 100
    assert common_prefix(a, token_array([*range(37), 999, *range(38, 100)])) == 37
    assert common_prefix(a, token_array([5])) == 0
    assert common_prefix(a, token_array(list(range(10)))) == 10
    assert common_prefix(token_array([]), a) == 0


def test_longest_returns_the_state_sharing_the_most_tokens() -> None:
    """Among saved states the one with the longest shared prefix wins, with that prefix's length."""
    cache = PrefixCache(limit_bytes=10_000)
    cache.put(_state([1, 2, 3, 4, 5], 100))
    cache.put(_state([1, 2, 9, 9], 100))
    cache.put(_state([7, 7, 7], 100))
    hit = cache.longest([1, 2, 3, 4, 8])
    assert hit is not None
    assert (list(hit[0].tokens), hit[1]) == ([1, 2, 3, 4, 5], 4)
    assert cache.longest([6, 1, 2]) is None


def test_bound_evicts_least_recently_used() -> None:
    """Past the byte bound the least recently used state goes first; a lookup counts as a use."""
    cache = PrefixCache(limit_bytes=3 * 116)  # each state: 100 bytes of context and four 4-byte tokens
    cache.put(_state([1, 0, 0, 0], 100))
    cache.put(_state([2, 0, 0, 0], 100))
    cache.put(_state([3, 0, 0, 0], 100))
    assert cache.longest([1, 0]) is not None  # state 1 is now the most recently used
    cache.put(_state([4, 0, 0, 0], 100))
    kept = sorted(s.tokens[0] for s in cache._states.values())
    stats = cache.stats()
    assert kept == [1, 3, 4]
    assert (stats.entries, stats.held_bytes, stats.evictions, stats.peak_bytes) == (3, 348, 1, 348)


def test_a_state_larger_than_the_bound_is_not_kept() -> None:
    """A state that alone passes the bound is dropped without evicting the others."""
    cache = PrefixCache(limit_bytes=200)
    cache.put(_state([1, 2], 100))
    cache.put(_state([3, 4], 500))
    assert [list(s.tokens) for s in cache._states.values()] == [[1, 2]]
    assert cache.stats().saves == 1


def test_a_state_extending_another_supersedes_it() -> None:
    """A saved state whose tokens are a prefix of a newer state's is dropped: the newer one serves its prompts."""
    cache = PrefixCache(limit_bytes=10_000)
    cache.put(_state([1, 2, 3], 100))
    cache.put(_state([1, 2, 3, 4, 5], 120))
    cache.put(_state([1, 2, 8], 100))
    assert sorted(list(s.tokens) for s in cache._states.values()) == [[1, 2, 3, 4, 5], [1, 2, 8]]
    assert cache.stats().held_bytes == 120 + 20 + 100 + 12


def test_zero_bound_keeps_nothing_and_set_limit_shrinks() -> None:
    """A zero bound is off; lowering the bound drops least recently used states until it fits."""
    off = PrefixCache(limit_bytes=0)
    off.put(_state([1], 1))
    assert (off.enabled, off.stats().entries, off.describe()) == (False, 0, "prefix cache off")
    cache = PrefixCache(limit_bytes=1000)
    cache.put(_state([1], 96))
    cache.put(_state([2], 96))
    cache.set_limit(150)
    assert [list(s.tokens) for s in cache._states.values()] == [[2]]
    with pytest.raises(ValueError, match="0 or more"):
        PrefixCache(limit_bytes=-1)
