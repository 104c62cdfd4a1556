"""fs_sandbox: confined, symlink-safe Read and Grep over the files under one root (stdlib + anyio only)."""

from fs_sandbox.errors import NotAFile, NotFound, PathRefused, PatternError, PatternTimeout, SandboxError
from fs_sandbox.paths import confine
from fs_sandbox.sandbox import GrepLine, GrepResult, ReadResult, Sandbox

__all__ = [
    "GrepLine",
    "GrepResult",
    "NotAFile",
    "NotFound",
    "PathRefused",
    "PatternError",
    "PatternTimeout",
    "ReadResult",
    "Sandbox",
    "SandboxError",
    "confine",
]
