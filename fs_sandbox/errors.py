"""Errors of the sandbox; each message is written for the model that asked.

```
SandboxError
├── PathRefused       the name is not allowed: empty, absolute, `..`, NUL, or it leads outside the root
├── NotFound          nothing is stored under that name (or a link points at nothing)
├── NotAFile          a directory, FIFO, socket, device, or a link to one
├── PatternError      the regular expression does not compile or is refused
└── PatternTimeout    the search ran past its time limit and was stopped
```
"""

from __future__ import annotations

__all__ = ["NotAFile", "NotFound", "PathRefused", "PatternError", "PatternTimeout", "SandboxError"]


class SandboxError(Exception):
    """Base of every error the sandbox raises on purpose."""


class PathRefused(SandboxError):
    """The name cannot be used inside the sandbox."""


class NotFound(SandboxError):
    """No file by that name."""


class NotAFile(SandboxError):
    """The name exists but is not a regular file."""


class PatternError(SandboxError):
    """The search pattern is invalid or refused."""


class PatternTimeout(SandboxError):
    """The search took longer than allowed and its worker was stopped."""
