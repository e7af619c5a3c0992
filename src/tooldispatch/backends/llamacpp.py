"""The in-process llama.cpp backend (``llama-cpp-python``): prompt mode, optional GBNF constraint, streaming.

The prompt is rendered with the GGUF's own chat template plus the tool block of the model family's
format (``tooldispatch.prompting``); templates that render tools themselves get the tools natively. Tokens
are generated on a worker thread and handed to the event loop through an ``asyncio.Queue``, so the loop
never blocks; closing the stream (or cancelling the task that reads it) stops generation at the next
token. Every event carries the ``time.monotonic()`` of the moment its token was produced.

``llama_cpp`` errors are translated at this seam: a missing or unreadable model file is a
``ModelNotFoundError`` naming the fix, an engine that cannot load is ``BackendUnavailable``, and a failure
while generating is ``ProviderError``.
"""

from __future__ import annotations

import asyncio
import codecs
import ctypes
import threading
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooldispatch.backends.base import (
    Capabilities,
    ChatRequest,
    ContentDelta,
    Event,
    Finish,
    ReasoningDelta,
    ReasoningEnd,
    Usage,
)
from tooldispatch.backends.messages import normalize_messages
from tooldispatch.backends.prefix_cache import DEFAULT_PREFIX_CACHE_MB, MB, PrefixCache
from tooldispatch.errors import (
    BackendUnavailable,
    ConfigError,
    ContextWindowExceeded,
    ModelNotFoundError,
    ProviderError,
)
from tooldispatch.models.gguf import GGUFError, GGUFHeader, read_header
from tooldispatch.models.manifest import Manifest, Reasoning, list_models, load_manifest
from tooldispatch.models.store import parse_spec, resolve
from tooldispatch.parsing.reasoning import MarkerSplitter
from tooldispatch.prompting.formats import get_format
from tooldispatch.prompting.grammar import LazyGrammar, lazy_tool_call_grammar, tool_call_grammar
from tooldispatch.prompting.prompt import render_prompt
from tooldispatch.prompting.template import ChatTemplate, template_source

DEFAULT_N_CTX_CAP = 16_384
"""The largest context window opened by default: the KV cache grows with it (about 200 MB for
Qwen2.5-Coder-0.5B and 470 MB for the 1.5B at 16k, in F16), and a CPU prompt this long takes minutes
anyway. Pass ``n_ctx`` to go beyond it, up to the model's trained length."""

FALLBACK_N_CTX = 4096
"""The window when neither the GGUF nor the manifest says the model's context length."""


def default_n_ctx(header: GGUFHeader, manifest_length: int | None = None, *, cap: int = DEFAULT_N_CTX_CAP) -> int:
    """The context window a model gets by default: its trained length, capped at ``cap``.

    Args:
        header: the GGUF header (``<arch>.context_length``).
        manifest_length: the manifest's ``context_length``, used when the file does not say.
        cap: the memory-safe ceiling.
    """
    length = header.context_length or manifest_length or FALLBACK_N_CTX
    return min(length, cap)


@dataclass(frozen=True, slots=True)
class _Profile:
    tool_format: str
    tool_results: str
    template: str
    reasoning: Reasoning | None
    name: str
    context_length: int | None = None
    call_shapes: tuple[str, ...] = ()


def _profile(manifest: Manifest | str | None, family: str | None, model_path: Path) -> _Profile:
    if isinstance(manifest, str):
        manifest = load_manifest(manifest)
    if manifest is None and family is not None:
        manifest = next((m for m in list_models() if m.family == family), None)
        if manifest is None:
            raise ConfigError(f"no model manifest has family {family!r}; pass manifest= or tool_format=")
    if manifest is None:
        return _Profile("hermes", "user_turn", "gguf", None, model_path.stem)
    return _Profile(
        manifest.tool_format,
        manifest.tool_results,
        manifest.chat_template,
        manifest.reasoning,
        manifest.id,
        manifest.context_length,
        manifest.call_shapes,
    )


class LlamaCppBackend:
    """Run a GGUF model in-process with llama.cpp.

    Args:
        model_path: a ``.gguf`` path, or ``name@QUANT`` of a model in the cache (its manifest is then used).
        manifest: the model's manifest (or its id): tool format, result style, template and reasoning
            markers. Without one (and without ``family``), the ``hermes`` format and the GGUF template.
        family: pick the first manifest of this family when ``manifest`` is not given.
        tool_format: override the manifest's tool format.
        n_ctx: context window in tokens; by default the model's trained context length (from the GGUF, else
            the manifest) capped at ``DEFAULT_N_CTX_CAP`` (16,384).
        n_threads: CPU threads (llama.cpp's default when ``None``).
        seed: default sampling seed (a request's ``seed`` wins).
        verbose: let llama.cpp log to stderr.
        chat_format_override: ``gguf``, ``builtin:<name>`` or a Jinja template source to use instead of the
            manifest's template.
        prefix_cache_mb: the most megabytes of saved context states kept so that a conversation interleaved
            with others does not evaluate its prompt again (``tooldispatch.backends.prefix_cache``); ``0``
            keeps none, and then only the prefix of the last request is reused.

    Raises:
        ModelNotFoundError: the file is missing or is not a readable GGUF (the message names the fix).
        BackendUnavailable: ``llama_cpp`` is not installed or failed to load the model.
        ConfigError: the template or tool format is unusable.
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        manifest: Manifest | str | None = None,
        family: str | None = None,
        tool_format: str | None = None,
        n_ctx: int | None = None,
        n_threads: int | None = None,
        seed: int = 0,
        verbose: bool = False,
        chat_format_override: str | None = None,
        prefix_cache_mb: int = DEFAULT_PREFIX_CACHE_MB,
    ) -> None:
        if isinstance(model_path, str) and not model_path.endswith(".gguf") and not Path(model_path).is_file():
            spec = parse_spec(model_path)
            manifest = manifest if manifest is not None else spec.manifest
        path = resolve(model_path)
        try:
            header = read_header(path)
        except (GGUFError, OSError) as exc:
            raise ModelNotFoundError(
                f"{path} is not a usable GGUF file ({exc}); pull it again (tooldispatch models pull NAME@QUANT --force)"
            ) from exc
        profile = _profile(manifest, family, path)
        self._tool_format = get_format(tool_format or profile.tool_format).name
        self._tool_results = profile.tool_results
        self._reasoning = profile.reasoning
        self._call_shapes = profile.call_shapes if self._tool_format == profile.tool_format else ()
        self.model_name = profile.name
        self.path = path
        self._seed = seed
        self._verbose = verbose
        if n_ctx is None:
            n_ctx = default_n_ctx(header, profile.context_length)
        elif n_ctx < 16:
            raise ConfigError(f"n_ctx must be at least 16 tokens, got {n_ctx}")
        if prefix_cache_mb < 0:
            raise ConfigError(f"prefix_cache_mb must be 0 (off) or a number of megabytes, got {prefix_cache_mb}")
        try:
            import llama_cpp  # optional dependency, loaded on use
        except ImportError as exc:
            raise BackendUnavailable(
                "the llamacpp backend needs llama-cpp-python; install it with: pip install 'tooldispatch[llama]'"
            ) from exc
        self._llama_cpp = llama_cpp
        from tooldispatch.backends._llama_lazy import LazyGrammarLlama

        try:
            self._llm = LazyGrammarLlama(
                model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, seed=seed, verbose=verbose
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise BackendUnavailable(f"llama.cpp could not load {path}: {exc}") from exc
        model = self._llm._model
        self._vocab = model.vocab
        bos = model.token_get_text(model.token_bos()) if model.token_bos() >= 0 else ""
        eos = model.token_get_text(model.token_eos()) if model.token_eos() >= 0 else ""
        setting = chat_format_override or profile.template
        source = setting if "{%" in setting or "{{" in setting else template_source(setting, header.chat_template)
        self.template = ChatTemplate(source, bos_token=bos, eos_token=eos)
        self._bos_text = bos
        self._add_bos = bool(model.add_bos_token())
        self._n_ctx = n_ctx
        self._lock = threading.Lock()
        self.prefix_cache = PrefixCache(limit_bytes=prefix_cache_mb * MB)
        """The saved context states of this model (used under ``_lock``; its ``stats()`` may be read anytime)."""
        self._grammars: dict[LazyGrammar, Any] = {}
        self._capabilities = Capabilities(
            native_tools=False,
            reasoning_field=False,
            constrained=True,
            engine="llama.cpp",
            engine_version=str(getattr(llama_cpp, "__version__", "")),
        )

    @property
    def capabilities(self) -> Capabilities:
        """In-process llama.cpp: prompt-mode tools, GBNF constraint available."""
        return self._capabilities

    @property
    def n_ctx(self) -> int:
        """The context window in tokens (prompt and completion together)."""
        return self._n_ctx

    @property
    def tool_format(self) -> str:
        """The tool prompt format this backend writes prompts in (``hermes_list`` for SmolLM2)."""
        return self._tool_format

    @property
    def parser_format(self) -> str:
        """The ``tool_format`` to pass to ``parse_tool_calls`` for this model's output."""
        return get_format(self._tool_format).parser_format

    @property
    def reasoning_open(self) -> bool:
        """Whether the prompt already opened a reasoning block (pass to ``parse_tool_calls``)."""
        return self._reasoning is not None and self._reasoning.starts_open

    def render(self, request: ChatRequest) -> str:
        """The prompt text this backend sends for a request (for inspection and tests)."""
        kwargs = request.extra.get("chat_template_kwargs") if isinstance(request.extra, Mapping) else None
        tools = request.tools if request.tool_choice != "none" else ()
        return render_prompt(
            self.template,
            normalize_messages(request.messages),
            tools,
            tool_format=self._tool_format,
            tool_results=self._tool_results,
            template_kwargs=kwargs if isinstance(kwargs, Mapping) else None,
        )

    def grammar_text(self, request: ChatRequest) -> str | None:
        """The GBNF grammar for a constrained request, or ``None`` when the request is not constrained."""
        constraint = self.constraint(request)
        return None if constraint is None else constraint.text

    def constraint(self, request: ChatRequest) -> LazyGrammar | None:
        """The grammar and its trigger patterns for a constrained request (``None``: not constrained).

        Under ``tool_choice="auto"`` a family whose manifest lists ``call_shapes`` gets llama.cpp's lazy
        grammar: free text until a call in its format or one of those shapes starts. Otherwise the grammar
        binds from the first token (no trigger patterns).
        """
        if not request.constrained or not request.tools or request.tool_choice == "none":
            return None
        if request.tool_choice == "auto" and self._call_shapes:
            return lazy_tool_call_grammar(request.tools, self._tool_format, call_shapes=self._call_shapes)
        text = tool_call_grammar(
            request.tools, self._tool_format, tool_choice=request.tool_choice, reasoning=self._reasoning
        )
        return LazyGrammar(text, ())

    def check_grammar(self, text: str) -> None:
        """Have llama.cpp parse a GBNF grammar against this model's vocabulary.

        ``LlamaGrammar.from_string`` only stores the text; llama.cpp parses it when the sampler is built,
        and a grammar it cannot parse would reach the sampler chain as a null pointer. This builds the
        grammar sampler once, up front, and frees it.

        Raises:
            ConfigError: llama.cpp cannot parse the grammar.
        """
        sampler = self._llama_cpp.llama_sampler_init_grammar(self._vocab, text.encode("utf-8"), b"root")
        if not sampler:
            raise ConfigError("llama.cpp could not parse the tool-call grammar; see its log on stderr for the rule")
        self._llama_cpp.llama_sampler_free(sampler)

    def _grammar(self, constraint: LazyGrammar) -> Any:
        grammar = self._grammars.get(constraint)
        if grammar is None:
            from llama_cpp.llama_grammar import LlamaGrammar  # present: the model loaded

            from tooldispatch.backends._llama_lazy import LazyLlamaGrammar

            self.check_grammar(constraint.text)
            if constraint.trigger_patterns:
                grammar = LazyLlamaGrammar(constraint.text, constraint.trigger_patterns)
            else:
                grammar = LlamaGrammar.from_string(constraint.text, verbose=self._verbose)
            self._grammars[constraint] = grammar
        return grammar

    def _tokenize(self, prompt: str) -> list[int]:
        add_bos = self._add_bos and not (self._bos_text and prompt.startswith(self._bos_text))
        tokens: list[int] = self._llm.tokenize(prompt.encode("utf-8"), add_bos=add_bos, special=True)
        return tokens

    def _piece(self, token: int) -> bytes:
        buf = ctypes.create_string_buffer(64)
        n = self._llama_cpp.llama_token_to_piece(self._vocab, token, buf, 64, 0, False)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = self._llama_cpp.llama_token_to_piece(self._vocab, token, buf, -n, 0, False)
        return bytes(buf.raw[:n])

    def _run(
        self,
        tokens: list[int],
        request: ChatRequest,
        grammar: Any,
        emit: Any,
        cancel: threading.Event,
    ) -> None:
        """Generate on the worker thread; ``emit`` hands ``(text, t)`` and the final tuple to the loop."""
        stops = [s for s in request.stop if s]
        hold = max((len(s) for s in stops), default=1) - 1
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        is_eog = self._llama_cpp.llama_vocab_is_eog
        pending = ""
        n = 0
        reason = "length"
        with self._lock:
            self.prefix_cache.prepare(self._llm, tokens)
            self._llm.set_seed(request.seed if request.seed is not None else self._seed)
            budget = min(request.max_tokens, self._n_ctx - len(tokens))
            for token in self._llm.generate(
                tokens, top_k=40, top_p=0.95, min_p=0.05, temp=request.temperature, repeat_penalty=1.0, grammar=grammar
            ):
                if cancel.is_set():
                    reason = "cancelled"
                    break
                if is_eog(self._vocab, token):
                    reason = "stop"
                    break
                n += 1
                pending += decoder.decode(self._piece(token))
                cut = min((i for i in (pending.find(s) for s in stops) if i >= 0), default=-1)
                if cut >= 0:
                    if cut:
                        emit(("text", pending[:cut], time.monotonic()))
                    pending = ""
                    reason = "stop"
                    break
                ready = len(pending) - hold if stops else len(pending)
                if ready > 0:
                    emit(("text", pending[:ready], time.monotonic()))
                    pending = pending[ready:]
                if n >= budget:
                    break
            pending += decoder.decode(b"", final=True)
            if pending:
                emit(("text", pending, time.monotonic()))
        emit(("done", reason, n))

    async def stream(self, request: ChatRequest) -> AsyncIterator[Event]:
        """Run one turn and yield its events, ending with ``Usage`` and ``Finish``.

        Raises:
            ContextWindowExceeded: the prompt plus the completion budget (``max_tokens``, at most half the
                window) does not fit the context; checked before anything is generated.
            ProviderError: llama.cpp failed while generating.
            ConfigError: the chat template or the tool-call grammar failed.
        """
        prompt = self.render(request)
        tokens = self._tokenize(prompt)
        reserve = max(1, min(request.max_tokens, self._n_ctx // 2))
        if len(tokens) + reserve > self._n_ctx:
            raise ContextWindowExceeded(
                f"the prompt has {len(tokens)} tokens and the turn needs room for {reserve} more, but the context "
                f"window is {self._n_ctx} tokens; start a shorter conversation or create the backend with a larger "
                "n_ctx",
                prompt_tokens=len(tokens),
                n_ctx=self._n_ctx,
                reserve=reserve,
            )
        constraint = self.constraint(request)
        grammar = self._grammar(constraint) if constraint is not None else None
        loop = asyncio.get_running_loop()
        # Tokens cross from the worker thread in batches: the worker appends to ``box`` and wakes the
        # loop only when no wake-up is pending, so a busy loop takes several tokens per wake-up (fewer
        # context switches) while an idle one still sees each token as soon as it exists.
        box: list[tuple[Any, ...]] = []
        box_lock = threading.Lock()
        ready = asyncio.Event()
        wake_pending = False
        cancel = threading.Event()

        def emit(item: tuple[Any, ...]) -> None:
            nonlocal wake_pending
            with box_lock:
                box.append(item)
                if wake_pending:
                    return
                wake_pending = True
            try:
                loop.call_soon_threadsafe(ready.set)
            except RuntimeError:  # the loop is closed: nobody is listening any more
                cancel.set()

        def work() -> None:
            try:
                self._run(tokens, request, grammar, emit, cancel)
            except Exception as exc:  # crosses the thread boundary; re-raised translated below
                emit(("error", exc))

        worker = threading.Thread(target=work, name="tooldispatch-llamacpp", daemon=True)
        worker.start()
        splitter = MarkerSplitter(self._reasoning) if self._reasoning else None
        try:
            while True:
                await ready.wait()
                with box_lock:
                    items = box[:]
                    box.clear()
                    wake_pending = False
                    ready.clear()
                for item in items:
                    if item[0] == "text":
                        for ev in self._events(splitter, item[1], item[2]):
                            yield ev
                    elif item[0] == "error":
                        exc = item[1]
                        raise ProviderError(f"llama.cpp failed while generating: {exc}") from exc
                    else:
                        now = time.monotonic()
                        if splitter is not None:
                            for kind, text in splitter.flush():
                                yield ReasoningDelta(text, t=now) if kind == "reasoning" else ContentDelta(text, t=now)
                        yield Usage(prompt_tokens=len(tokens), completion_tokens=item[2], t=now)
                        yield Finish(reason=item[1], model=self.model_name, t=time.monotonic())
                        return
        finally:
            cancel.set()

    @staticmethod
    def _events(splitter: MarkerSplitter | None, text: str, t: float) -> list[Event]:
        if splitter is None:
            return [ContentDelta(text, t=t)]
        out: list[Event] = []
        for kind, piece in splitter.feed(text):
            if kind == "reasoning":
                out.append(ReasoningDelta(piece, t=t))
            elif kind == "end":
                out.append(ReasoningEnd(t=t))
            else:
                out.append(ContentDelta(piece, t=t))
        return out

    def close(self) -> None:
        """Free the model now instead of at garbage collection."""
        with self._lock:
            self._llm.close()
