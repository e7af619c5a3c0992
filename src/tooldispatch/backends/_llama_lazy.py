"""llama-cpp-python's ``Llama`` with llama.cpp's lazy grammar sampler, for constrained ``auto`` turns.

``Llama.generate`` builds its sampler chain in ``_init_sampler`` and always adds a grammar as an eager one
(``llama_sampler_init_grammar``). A ``LazyLlamaGrammar`` carries trigger patterns; for it the chain's grammar
sampler is replaced, in place, by ``llama_sampler_init_grammar_lazy_patterns`` on the same grammar, so every
other sampler keeps the library's order and settings. Imported only once ``llama_cpp`` loaded.
"""

from __future__ import annotations

import ctypes
from typing import Any

import llama_cpp
from llama_cpp.llama_grammar import LlamaGrammar

from tooldispatch.errors import ConfigError


class LazyLlamaGrammar(LlamaGrammar):
    """A ``LlamaGrammar`` that waits for one of ``trigger_patterns`` before it binds."""

    def __init__(self, text: str, trigger_patterns: tuple[str, ...]) -> None:
        super().__init__(_grammar=text)
        self.trigger_patterns = trigger_patterns


class LazyGrammarLlama(llama_cpp.Llama):
    """``llama_cpp.Llama`` whose sampler chain takes a ``LazyLlamaGrammar`` as llama.cpp's lazy grammar."""

    def _init_sampler(self, *args: Any, **kwargs: Any) -> Any:
        sampler = super()._init_sampler(*args, **kwargs)
        grammar = kwargs.get("grammar")
        if isinstance(grammar, LazyLlamaGrammar):
            _make_lazy(sampler.sampler, self._model.vocab, grammar)
        return sampler


def _make_lazy(chain: Any, vocab: Any, grammar: LazyLlamaGrammar) -> None:
    """Swap the chain's grammar sampler for a lazy one on the same grammar, at the same place."""
    n = llama_cpp.llama_sampler_chain_n(chain)
    names = [llama_cpp.llama_sampler_name(llama_cpp.llama_sampler_chain_get(chain, i)) for i in range(n)]
    if b"grammar" not in names:
        raise ConfigError("llama-cpp-python built no grammar sampler; the lazy grammar needs llama-cpp-python 0.3.36")
    at = names.index(b"grammar")
    patterns = (ctypes.c_char_p * len(grammar.trigger_patterns))(*(p.encode("utf-8") for p in grammar.trigger_patterns))
    lazy = llama_cpp.llama_sampler_init_grammar_lazy_patterns(
        vocab,
        grammar._grammar.encode("utf-8"),
        grammar._root.encode("utf-8"),
        patterns,
        len(grammar.trigger_patterns),
        None,
        0,
    )
    if not lazy:
        raise ConfigError("llama.cpp could not build the lazy tool-call grammar; see its log on stderr")
    after = [llama_cpp.llama_sampler_chain_remove(chain, i) for i in range(n - 1, at - 1, -1)]
    llama_cpp.llama_sampler_free(after.pop())
    llama_cpp.llama_sampler_chain_add(chain, lazy)
    for sampler in reversed(after):
        llama_cpp.llama_sampler_chain_add(chain, sampler)
