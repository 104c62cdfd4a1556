"""Errors of the extraction package.

```
ExtractionError
├── LLMError             the language model could not answer
│   ├── LLMUnavailable   no backend, or it refused the connection
│   ├── LLMTimeout       no answer within the backend's timeout
│   └── LLMBadResponse   an answer that is not a usable completion (malformed JSON, HTTP error)
│       └── LLMContextOverflow  the prompt did not fit the model's context window (which it may name)
└── NoFinalReport        the model gave no usable answer (an empty one, or none after the tool loop)
    └── Ungrounded       read-grep: the model answered before looking at the output at all
```
"""

from __future__ import annotations

__all__ = [
    "ExtractionError",
    "LLMBadResponse",
    "LLMContextOverflow",
    "LLMError",
    "LLMTimeout",
    "LLMUnavailable",
    "NoFinalReport",
    "Ungrounded",
]


class ExtractionError(Exception):
    """Base of every error extraction raises on purpose."""


class LLMError(ExtractionError):
    """The language model could not answer."""


class LLMUnavailable(LLMError):
    """There is no model to ask, or it cannot be reached."""


class LLMTimeout(LLMError):
    """The model did not answer in time."""


class LLMBadResponse(LLMError):
    """The model's answer is not a usable completion."""


class LLMContextOverflow(LLMBadResponse):
    """The endpoint refused a prompt longer than its context window; `window` is the size it named, if any.

    Asking again the same way fails the same way, so it is never retried as it is: the caller splits smaller."""

    def __init__(self, message: str, window: int | None) -> None:
        super().__init__(message)
        self.window = window


class NoFinalReport(ExtractionError):
    """The model gave no usable answer."""


class Ungrounded(NoFinalReport):
    """In read-grep, the model answered without one Read or Grep: its answer cannot come from the output."""
