"""When a server that asked for roots has had the chance to apply them, before a client's first call goes to it.

A server gets our answer to its `roots/list` and applies it in its own time: server-filesystem
(@modelcontextprotocol/server-filesystem) checks each root on disk (`fs.realpath`, `fs.stat`) before it replaces its
allowed directories, and a call that arrives meanwhile is served with the directories it started with. No message
of the protocol says "roots applied". What a real server does give:

1. a `ping` sent after our answer is read after it (a server reads its messages in order), so its reply says the
   answer arrived, though not that it was applied (server-filesystem answers the ping while its checks run);
2. server-filesystem then writes one line on stderr ("Updated allowed directories from MCP roots: …", or why it kept
   its directories): the signal, for a stdio server, is the first line it ends on stderr after our answer.

A server that writes nothing is given `ROOTS_SETTLE_S` after the ping's reply; one served over HTTP, the ping only.
"""

from __future__ import annotations

import logging
import warnings
from typing import TYPE_CHECKING

import anyio
from mcp.shared.exceptions import MCPDeprecationWarning

if TYPE_CHECKING:
    from server.downstream.server import Downstream

__all__ = ["ROOTS_SETTLE_S", "roots_applied"]

logger = logging.getLogger(__name__)

ROOTS_SETTLE_S = 0.5
"""The most a client's first call waits, after the ping's reply, for a stdio server's line on stderr."""


async def roots_applied(downstream: Downstream, mark: int) -> None:
    """Until `downstream` has had its chance to apply the roots just answered: a ping's round trip, then (a stdio
    server) its first line on stderr past `mark` (its count of lines when the answer was made), or `ROOTS_SETTLE_S`.
    Returns early, never raises, when the server is gone: the call then meets whatever is there."""
    try:
        client = await downstream.client("ping")
        with anyio.move_on_after(downstream.connect_timeout), warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)  # ping is deprecated at 2026-07-28 only
            await client.send_ping()
    except Exception as exc:  # boundary: a server that went away is reported by the call itself
        logger.debug("server %r: no ping after its roots (%s)", downstream.name, exc)
        return
    process = downstream.process
    if process is not None:
        with anyio.move_on_after(ROOTS_SETTLE_S):
            await process.stderr.line_after(mark)
