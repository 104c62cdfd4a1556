"""fs_sandbox: confined, symlink-safe Read and Grep over the files under one root (stdlib, anyio and google-re2).

`open_file` is the one door: a regular file under a directory, reached by descriptor without following
any link, its size taken from the descriptor. Read and Grep stream from what it opened.
"""

from fs_sandbox._engine import literal_finder
from fs_sandbox._fair import FairQueue
from fs_sandbox._index import SUFFIX as INDEX_SUFFIX
from fs_sandbox._index import IndexBuilder, LineIndex
from fs_sandbox.errors import Busy, NotAFile, NotFound, PathRefused, PatternError, PatternTimeout, SandboxError
from fs_sandbox.paths import OpenFile, confine, open_file
from fs_sandbox.sandbox import GrepLine, GrepResult, ReadResult, Sandbox, Snippet

__all__ = [
    "INDEX_SUFFIX",
    "Busy",
    "FairQueue",
    "GrepLine",
    "GrepResult",
    "IndexBuilder",
    "LineIndex",
    "NotAFile",
    "NotFound",
    "OpenFile",
    "PathRefused",
    "PatternError",
    "PatternTimeout",
    "ReadResult",
    "Sandbox",
    "SandboxError",
    "Snippet",
    "confine",
    "literal_finder",
    "open_file",
]
