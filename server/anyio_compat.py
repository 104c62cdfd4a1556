"""The one private part of anyio claimcheck uses, with why and what would replace it (tests/test_compat_canary.py
fails, naming it, when it moves)."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["stream_writer_of"]


def stream_writer_of(stream: Any) -> asyncio.StreamWriter | None:
    """The asyncio `StreamWriter` under an anyio process's stdin stream (None on another backend). The stdio fast
    path writes a request to a downstream without a checkpoint when the pipe's transport has room, which anyio's
    `send` cannot do. Would be replaced by: a `send_nowait` on anyio's byte streams."""
    writer = getattr(stream, "_stream", None)
    return writer if isinstance(writer, asyncio.StreamWriter) else None
