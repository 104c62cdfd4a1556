"""Errors of the extraction package.

```
ExtractionError
├── LLMError             the language model could not answer
│   ├── LLMUnavailable   no backend, or it refused the connection
│   ├── LLMTimeout       no answer within the backend's timeout
│   └── LLMBadResponse   an answer that is not a usable completion (malformed JSON, HTTP error)
└── NoFinalReport        the model answered without the FINAL wrapper
    └── Ungrounded       read-grep: the model answered before looking at the output at all
```
"""

from __future__ import annotations

__all__ = [
    "ExtractionError",
    "LLMBadResponse",
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


class NoFinalReport(ExtractionError):
    """The model did not put its answer in the FINAL wrapper."""


class Ungrounded(NoFinalReport):
    """In read-grep, the model answered without one Read or Grep: its answer cannot come from the output."""
