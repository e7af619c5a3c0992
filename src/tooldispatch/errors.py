"""The exception tree, split by who must act.

::

    TooldispatchError                 root: catch this to catch everything of ours
    ├── ConfigError                   the user must fix a setting, a profile, a schema or a path
    │   ├── ModelNotFoundError        a model file is missing or corrupt (message names the fix)
    │   └── RegistrationError         a tool cannot be dispatched safely as declared
    ├── BackendError                  the serving engine failed; may be retried later
    │   ├── BackendUnavailable        connection refused, dead server, engine failed to load
    │   │   ├── BackendTimeout        the engine did not answer (or send more of its answer) in time
    │   │   └── BackendDropped        the engine's answer began and then broke off (cut stream, reset)
    │   ├── RateLimited               429 / quota; ``retry_after`` in seconds when the server said
    │   └── ProviderError             the engine answered with an error (4xx/5xx, error inside a 200 stream)
    │       └── ContextWindowExceeded the prompt plus the turn's completion budget does not fit the window
    ├── StoreUnavailable              the state store's server failed mid-run (lost connection); retry when it is back
    ├── ModelOutputError              the model's output cannot be used (no valid call where one was needed)
    └── ToolError                     a tool failed; becomes a model-visible result unless asked to raise
        └── ToolTimeout               a tool ran past its own budget

Third-party errors (``openai``, ``httpx``, ``llama_cpp``, ``sqlite3``) are translated at the seam where
they arise with ``raise ... from``, so callers only ever see this tree.
"""

from __future__ import annotations


class TooldispatchError(Exception):
    """Root of every error raised by tooldispatch."""


class ConfigError(TooldispatchError):
    """A setting, profile, schema or path is wrong; the message says how to fix it."""


class InvalidSchema(ConfigError):
    """A tool's parameters schema is not a valid JSON Schema.

    Attributes:
        path: the JSON pointer, within the schema, of the part that is wrong (``/`` for the whole).
        detail: what is wrong there, as ``jsonschema``'s meta-schema check says it.
    """

    def __init__(self, message: str, *, path: str, detail: str) -> None:
        super().__init__(message)
        self.path = path
        self.detail = detail


class ModelNotFoundError(ConfigError):
    """A model file is missing or corrupt; the message names the command that fixes it."""


class RegistrationError(ConfigError):
    """A tool was declared in a way that cannot be dispatched safely."""


class BackendError(TooldispatchError):
    """The serving engine failed.

    Attributes:
        status: the HTTP status when there was one.
        retryable: whether trying again later may succeed.
    """

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class BackendUnavailable(BackendError):
    """The engine cannot be reached or could not start."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message, status=status, retryable=True)


class BackendTimeout(BackendUnavailable):
    """The engine did not answer, or send more of its answer, within the time allowed."""


class BackendDropped(BackendUnavailable):
    """The engine's answer began and then broke off (a reset connection, a stream cut before its end)."""


class RateLimited(BackendError):
    """The engine or provider asked us to slow down.

    Attributes:
        retry_after: seconds to wait, from ``Retry-After``, when the server said.
    """

    def __init__(self, message: str, *, retry_after: float | None = None, status: int | None = 429) -> None:
        super().__init__(message, status=status, retryable=True)
        self.retry_after = retry_after


class ProviderError(BackendError):
    """The engine answered with an error (including errors inside an HTTP 200 stream)."""


class ContextWindowExceeded(ProviderError):
    """The prompt and the turn's completion budget do not fit the model's context window; nothing was generated.

    Attributes:
        prompt_tokens: tokens in the rendered prompt (0 when a server refused without saying).
        n_ctx: the context window.
        reserve: completion tokens the turn asked room for (0 when a server refused without saying).
        status: the HTTP status when a server refused the request (vLLM answers 400).
    """

    def __init__(
        self, message: str, *, prompt_tokens: int, n_ctx: int, reserve: int, status: int | None = None
    ) -> None:
        super().__init__(message, status=status)
        self.prompt_tokens = prompt_tokens
        self.n_ctx = n_ctx
        self.reserve = reserve


class StoreUnavailable(TooldispatchError):
    """The state store's database server failed while in use (lost connection, shut down); nothing half-written.

    A store that cannot be opened at all is a ``ConfigError`` naming the fix; this is the server going away later.
    """


class ModelOutputError(TooldispatchError):
    """The model's output could not be turned into what was needed."""


class ToolError(TooldispatchError):
    """A tool failed.

    Tools may raise it (or a subclass) to control the retry decision.

    Attributes:
        retryable: ``True`` for transient failures, ``False`` for permanent ones, ``None`` when unknown.
        retry_after: seconds to wait before retrying, when the failing service said.
        status: an HTTP-like status code when the tool wraps a service.
        before_execution: ``True`` when the failure happened before any side effect (connection refused).
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool | None = None,
        retry_after: float | None = None,
        status: int | None = None,
        before_execution: bool = False,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.status = status
        self.before_execution = before_execution


class ToolTimeout(ToolError):
    """A tool ran past its own timeout."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=True)


__all__ = [
    "BackendError",
    "BackendUnavailable",
    "ConfigError",
    "ModelNotFoundError",
    "ModelOutputError",
    "ProviderError",
    "RateLimited",
    "RegistrationError",
    "ToolError",
    "ToolTimeout",
    "TooldispatchError",
]
