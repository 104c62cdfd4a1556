"""Public tool names: `<prefix><separator><tool>`, at most `settings.toolNameMax` characters (64 for resources and
prompts), and the include/exclude filter."""

from __future__ import annotations

import hashlib
from fnmatch import fnmatchcase

from server.config import ToolFilter

__all__ = ["MAX_TOOL_NAME", "public_name", "tool_allowed"]

MAX_TOOL_NAME = 64
_HASH_LEN = 8


def public_name(prefix: str, separator: str, tool: str, most: int = MAX_TOOL_NAME) -> str:
    """The name a client sees; names over `most` characters keep their head and end in a stable short hash."""
    name = f"{prefix}{separator}{tool}" if prefix else tool
    if len(name) <= most:
        return name
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:_HASH_LEN]
    return f"{name[: most - _HASH_LEN - 1]}_{digest}"


def tool_allowed(tool: str, tools: ToolFilter) -> bool:
    """Whether a downstream tool passes the server's globs (case-sensitive; exclude wins)."""
    if tools.include is not None and not any(fnmatchcase(tool, pattern) for pattern in tools.include):
        return False
    return not any(fnmatchcase(tool, pattern) for pattern in tools.exclude)
