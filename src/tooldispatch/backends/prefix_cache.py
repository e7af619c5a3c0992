"""Saved llama.cpp context states keyed by their token prefix, so interleaved conversations keep their prefill.

``llama_cpp.Llama.generate`` reuses the part of its live context that the new prompt starts with, and only
that: one request from another conversation (a title, a summary, a second session) overwrites the context,
and the first conversation's next turn evaluates its whole prompt again (35 s for 4,000 tokens of
Qwen2.5-Coder-0.5B on two cores). :class:`PrefixCache` keeps the displaced contexts:

* **What is saved**: llama.cpp's context state (``llama_state_get_data``: the KV cache of the evaluated tokens
  and the last logits) with the tokens it holds, taken just before a request would discard more than
  :data:`MIN_REUSE_TOKENS` of the live context. Nothing is saved while one conversation runs alone.
* **Lookup**: the saved state that shares the longest prefix with the new prompt; it is restored when it
  covers at least :data:`MIN_REUSE_TOKENS` more of the prompt than the live context does, up to
  :data:`MIN_REPLAY_TOKENS` before the prompt's end, and ``Llama.generate`` then evaluates only the rest (it
  trims what the prompt does not share).
* **Bound**: least recently used states are dropped once the held bytes pass ``limit_bytes``; a state
  larger than the bound is not kept, and a state whose tokens are a prefix of a newer one is dropped (the
  newer one serves every prompt the older one would).

The states are not ``Llama.save_state``'s: that one also copies the ``n_batch x n_vocab`` score matrix
(311 MB for Qwen's 151,936-token vocabulary) that sampling never reads unless ``logits_all`` is set, so a
bound on it would count mostly empty scores; ``LlamaRAMCache`` keys on whole states of that kind and does
not say how long the shared prefix is. The restore mirrors ``Llama.load_state`` without the scores.

A cache belongs to one ``Llama`` (a state only fits the context it was taken from) and is used under the
backend's generation lock; its counters may be read from any thread.
"""

from __future__ import annotations

import ctypes
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

DEFAULT_PREFIX_CACHE_MB = 1024
"""The default bound: two full 16,384-token windows of Qwen2.5-Coder-1.5B (about 470 MB each in F16), five of
the 0.5B, or some twenty 4,000-token agent conversations of the 0.5B (about 48 MB each)."""

MIN_REUSE_TOKENS = 64
"""Fewer tokens than this are cheaper to evaluate again than to save and restore a context for."""

MIN_REPLAY_TOKENS = 32
"""A restore keeps the saved prefix only up to this many tokens before the prompt's end, and those tokens are
evaluated again in one batch. llama.cpp's CPU kernels take other paths for batches of a few tokens than for a
prompt's batch (the low bits of the logits differ), so a restore that left one or two tokens to evaluate could
turn a greedy near-tie the other way: on Qwen2.5-Coder-0.5B a conversation's first turn asked again gave
another tool name when 1 or 2 tokens were evaluated after the restore, and the cache-off answer with 16 or more.
Evaluating 32 tokens again costs a fraction of a second next to the thousands a restore saves."""

MB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class SavedState:
    """One llama.cpp context state: its bytes and the tokens its KV cache holds."""

    tokens: array[int]
    data: Any
    """The ``ctypes`` byte array ``llama_state_get_data`` filled."""
    size: int

    @property
    def nbytes(self) -> int:
        """What the state holds in memory: the context bytes and its token ids."""
        return self.size + self.tokens.itemsize * len(self.tokens)


@dataclass(frozen=True, slots=True)
class PrefixStats:
    """A snapshot of a cache's counters."""

    limit_bytes: int
    entries: int
    held_bytes: int
    peak_bytes: int
    saves: int
    restores: int
    restored_tokens: int
    evictions: int


def token_array(tokens: Sequence[int]) -> array[int]:
    """``tokens`` as the compact array the cache compares (4 bytes a token, compared in C)."""
    return tokens if isinstance(tokens, array) else array("i", tokens)


def common_prefix(a: array[int], b: array[int]) -> int:
    """The number of leading tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo] and a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


class PrefixCache:
    """Saved context states of one ``Llama``, longest-prefix lookup, least recently used out past a byte bound.

    Args:
        limit_bytes: the most bytes of saved states held at once (``0``: keep nothing).
        min_reuse_tokens: the smallest gain, in prompt tokens, worth a save or a restore.
    """

    def __init__(self, *, limit_bytes: int, min_reuse_tokens: int = MIN_REUSE_TOKENS) -> None:
        if limit_bytes < 0:
            raise ValueError(f"limit_bytes must be 0 or more, got {limit_bytes}")
        self.limit_bytes = limit_bytes
        self.min_reuse_tokens = min_reuse_tokens
        self._states: OrderedDict[int, SavedState] = OrderedDict()
        self._next_id = 0
        self._held = 0
        self._peak = 0
        self._saves = 0
        self._restores = 0
        self._restored_tokens = 0
        self._evictions = 0

    @property
    def enabled(self) -> bool:
        """Whether the cache keeps anything."""
        return self.limit_bytes > 0

    def describe(self) -> str:
        """One line for a command's start-up banner."""
        if not self.enabled:
            return "prefix cache off"
        return f"prefix cache up to {self.limit_bytes // MB} MB (--prefix-cache-mb; 0 turns it off)"

    def stats(self) -> PrefixStats:
        """The counters now."""
        return PrefixStats(
            limit_bytes=self.limit_bytes,
            entries=len(self._states),
            held_bytes=self._held,
            peak_bytes=self._peak,
            saves=self._saves,
            restores=self._restores,
            restored_tokens=self._restored_tokens,
            evictions=self._evictions,
        )

    def longest(self, tokens: Sequence[int]) -> tuple[SavedState, int] | None:
        """The saved state sharing the longest prefix with ``tokens`` and that prefix's length, marked as used."""
        tokens = token_array(tokens)
        best: tuple[int, int] | None = None
        for key, state in self._states.items():
            shared = common_prefix(state.tokens, tokens)
            if shared and (best is None or shared > best[1]):
                best = (key, shared)
        if best is None:
            return None
        self._states.move_to_end(best[0])
        return self._states[best[0]], best[1]

    def put(self, state: SavedState) -> None:
        """Keep ``state``, dropping the states it supersedes and then the least recently used past the bound."""
        if state.nbytes > self.limit_bytes:
            return
        for key in [k for k, s in self._states.items() if common_prefix(s.tokens, state.tokens) == len(s.tokens)]:
            self._drop(key)
        self._states[self._next_id] = state
        self._next_id += 1
        self._held += state.nbytes
        self._saves += 1
        while self._held > self.limit_bytes:
            self._drop(next(iter(self._states)))
            self._evictions += 1
        self._peak = max(self._peak, self._held)

    def set_limit(self, limit_bytes: int) -> None:
        """Change the bound (``0``: keep nothing), dropping the least recently used states past it."""
        if limit_bytes < 0:
            raise ValueError(f"limit_bytes must be 0 or more, got {limit_bytes}")
        self.limit_bytes = limit_bytes
        while self._held > limit_bytes:
            self._drop(next(iter(self._states)))
            self._evictions += 1

    def _drop(self, key: int) -> None:
        self._held -= self._states.pop(key).nbytes

    def prepare(self, llm: Any, tokens: Sequence[int]) -> int:
        """Before ``llm.generate(tokens)``: keep the live context if it is about to be lost, restore a better one.

        Returns the number of prompt tokens the context now holds in common with ``tokens`` (what
        ``generate`` will not evaluate again, give or take the one token it replays).
        """
        tokens = token_array(tokens)
        live_n = int(llm.n_tokens)
        live = array("i")
        live.frombytes(llm.input_ids[:live_n].astype("int32").tobytes())
        live_shared = common_prefix(live, tokens)
        if not self.enabled:
            return live_shared
        hit = self.longest(tokens)
        # A restored prefix stops MIN_REPLAY_TOKENS short of the prompt's end (see the constant).
        keep = 0 if hit is None else min(hit[1], len(tokens) - MIN_REPLAY_TOKENS)
        restore = hit is not None and keep - live_shared >= self.min_reuse_tokens
        if live_n - live_shared >= self.min_reuse_tokens:
            saved = _save(llm, live, self.limit_bytes)
            if saved is not None:
                self.put(saved)
        if not restore or hit is None:
            return live_shared
        _load(llm, hit[0], keep)
        self._restores += 1
        self._restored_tokens += keep
        return keep


def _save(llm: Any, tokens: array[int], limit_bytes: int) -> SavedState | None:
    """The live context's state, or ``None`` when it alone would pass the bound (nothing is copied then)."""
    import llama_cpp  # present: the model is loaded

    size = int(llama_cpp.llama_state_get_size(llm.ctx))
    if size + tokens.itemsize * len(tokens) > limit_bytes:
        return None
    data = (ctypes.c_uint8 * size)()
    written = int(llama_cpp.llama_state_get_data(llm.ctx, data, size))
    if written > size:
        raise RuntimeError(f"llama.cpp wrote {written} bytes of state into {size}")
    return SavedState(tokens=tokens, data=data, size=written)


def _load(llm: Any, state: SavedState, keep: int) -> None:
    """Restore ``state`` and mark its first ``keep`` tokens as the live context (``generate`` drops the rest)."""
    import llama_cpp  # present: the model is loaded

    if int(llama_cpp.llama_state_set_data(llm.ctx, state.data, state.size)) != state.size:
        raise RuntimeError("llama.cpp could not restore a saved context state")
    llm.input_ids[:keep] = state.tokens[:keep]
    llm.n_tokens = keep
    # As ``Llama.load_state`` does: the restored logits are not sampled from; ``generate`` replays a token.
    llm._requires_eval = True
