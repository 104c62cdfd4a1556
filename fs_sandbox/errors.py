"""Errors of the sandbox; each message is written for the model that asked.

```
SandboxError
├── PathRefused       the name is not allowed: empty, absolute, `..`, NUL, or it leads through a link
├── NotFound          nothing is stored under that name
├── NotAFile          a directory, FIFO, socket, device or symbolic link (links are never followed)
├── PatternError      the regular expression does not compile or is refused
├── PatternTimeout    the search ran past its time limit and was stopped
└── Busy              the caller already has as many searches queued or running as it may
```
"""

from __future__ import annotations

__all__ = ["Busy", "NotAFile", "NotFound", "PathRefused", "PatternError", "PatternTimeout", "SandboxError"]


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


class Busy(SandboxError):
    """Too many searches of one owner are in flight; refused at once rather than queued without end."""
