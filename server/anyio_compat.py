"""The one private part of anyio claimcheck uses, with why and what would replace it (tests/test_compat_canary.py
fails, naming it, when it moves)."""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["pipe_fd_of", "stream_writer_of"]


def stream_writer_of(stream: Any) -> asyncio.StreamWriter | None:
    """The asyncio `StreamWriter` under an anyio process's stdin stream (None on another backend). The stdio fast
    path writes a request to a downstream without a checkpoint when the pipe's transport has room, which anyio's
    `send` cannot do. Would be replaced by: a `send_nowait` on anyio's byte streams."""
    writer = getattr(stream, "_stream", None)
    return writer if isinstance(writer, asyncio.StreamWriter) else None


def pipe_fd_of(stream: Any) -> int | None:
    """The descriptor of the pipe under an anyio process's stdout stream (None on another backend). The stdio
    transport widens that pipe (F_SETPIPE_SZ) so a fast server writes a megabyte per wake-up instead of 64 KiB.
    Would be replaced by: creating the pipe itself and reading it with `anyio.wait_readable`."""
    reader = getattr(stream, "_stream", None)
    transport = getattr(reader, "_transport", None) if isinstance(reader, asyncio.StreamReader) else None
    pipe = transport.get_extra_info("pipe") if transport is not None else None
    try:
        return pipe.fileno() if pipe is not None else None
    except (OSError, ValueError):
        return None
